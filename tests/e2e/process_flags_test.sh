#!/usr/bin/env bash
# topk-server's own flags as an operator meets them: --help lists the flags
# and exits 0, --version names the version, and a bad --log_level or a
# negative --drain_deadline stops the start with a message (exit 1) instead
# of being taken.
# Usage: process_flags_test.sh TOPK_SERVER
set -uo pipefail
server=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

timeout 20 "$server" --help >"$out" 2>&1 || fail "--help exited $?"
grep -q -- "--listen" "$out" || fail "--help does not list --listen"
grep -q -- "--drain_deadline" "$out" || fail "--help does not list --drain_deadline"

timeout 20 "$server" --version >"$out" 2>&1 || fail "--version exited $?"
grep -Eq "topk-server [0-9]+\.[0-9]+\.[0-9]+" "$out" || fail "--version has no version"

for bad in --log_level=bogus --drain_deadline=-5s --stream_idle_timeout=0s --malloc_arenas=-1; do
  timeout 20 "$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu "$bad" >"$out" 2>&1
  rc=$?
  [ $rc = 1 ] || fail "$bad: exit status $rc (want 1: refused at start)"
  grep -q -- "${bad%%=*}" "$out" || fail "$bad: the message does not name the flag"
done
echo "process flags: ok"
