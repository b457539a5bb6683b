#!/usr/bin/env bash
# The co-located form on a plain host: a private MPS control daemon, topk-server
# on a unix socket under it, and the exports a frontend needs to join them.
#
#   deploy/colocated/run-local.sh SERVER_BIN [extra topk-server flags...]
#
# What it does, in order:
#   1. makes a private directory /tmp/topk-colocated.XXXXXX holding the MPS pipe
#      and log directories, the socket and the server's log;
#   2. starts an MPS control daemon there (nvidia-cuda-mps-control -d with
#      CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY set to it);
#   3. starts SERVER_BIN --enable_regions --listen=unix:DIR/topk.sock (extra
#      flags come after these, so they can override them: absl flags, last wins);
#   4. waits until `topk-cli health` answers SERVING, prints the server's MPS log
#      line and the exports for the frontend;
#   5. waits for the server; on exit (Ctrl-C, SIGTERM, the server ending) it
#      stops the server (SIGTERM: drain), quits the daemon
#      (echo quit | nvidia-cuda-mps-control) and removes the directory.
#
# The frontend must run as the same user as this script (the channel control
# blocks are mode 0600, CUDA IPC and MPS need one user) and with the printed
# CUDA_MPS_PIPE_DIRECTORY, else its contexts are not MPS clients of this daemon.
#
# Environment:
#   TOPK_CLI     topk-cli to use (default: next to SERVER_BIN, the build tree's
#                client/tools/topk-cli, then PATH)
#   TOPK_MPS=0   start no MPS daemon (a CPU build, or a host whose MPS is already
#                managed elsewhere: then export its CUDA_MPS_* yourself)
#   TOPK_WAIT_S  how long to wait for SERVING (default 120)
#   TOPK_KEEP=1  keep the private directory (logs) on exit
set -euo pipefail

usage() { echo "usage: $0 SERVER_BIN [extra topk-server flags...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
server_bin=$1; shift
[ -x "$server_bin" ] || { echo "$0: $server_bin is not an executable" >&2; exit 2; }

find_cli() {
  if [ -n "${TOPK_CLI:-}" ]; then echo "$TOPK_CLI"; return; fi
  local dir; dir=$(dirname "$server_bin")
  for c in "$dir/topk-cli" "$dir/../client/tools/topk-cli"; do
    if [ -x "$c" ]; then echo "$c"; return; fi
  done
  command -v topk-cli || true
}
cli=$(find_cli)
if [ -z "$cli" ] || [ ! -x "$cli" ]; then
  echo "$0: topk-cli not found (set TOPK_CLI)" >&2
  exit 2
fi

use_mps=${TOPK_MPS:-1}
if [ "$use_mps" != 0 ] && ! command -v nvidia-cuda-mps-control >/dev/null; then
  echo "$0: nvidia-cuda-mps-control not in PATH (it ships with the NVIDIA driver); TOPK_MPS=0 runs without MPS" >&2
  exit 2
fi

dir=$(mktemp -d /tmp/topk-colocated.XXXXXX)
chmod 0700 "$dir"
socket=$dir/topk.sock
target=unix:$socket
server_log=$dir/server.log
server_pid=
daemon_started=0

# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    echo "run-local: stopping topk-server (pid $server_pid, SIGTERM: drain)" >&2
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "$daemon_started" = 1 ]; then
    echo "run-local: quitting the MPS control daemon" >&2
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true
  fi
  if [ "${TOPK_KEEP:-0}" = 1 ]; then
    echo "run-local: kept $dir" >&2
  else
    rm -rf "$dir"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$use_mps" != 0 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$dir/mps-pipe CUDA_MPS_LOG_DIRECTORY=$dir/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  daemon_started=1
  # The daemon answers on its pipe once it is up (an empty server list).
  for _ in $(seq 50); do
    if echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then break; fi
    sleep 0.1
  done
  echo "run-local: MPS control daemon up (pipe $CUDA_MPS_PIPE_DIRECTORY)" >&2
fi

"$server_bin" --enable_regions --listen="$target" "$@" >"$server_log" 2>&1 &
server_pid=$!

deadline=$((SECONDS + ${TOPK_WAIT_S:-120}))
until "$cli" health --target="$target" >/dev/null 2>&1; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    echo "run-local: topk-server exited before it was SERVING; its log:" >&2
    tail -n 30 "$server_log" >&2
    exit 1
  fi
  if [ $SECONDS -ge $deadline ]; then
    echo "run-local: topk-server not SERVING after ${TOPK_WAIT_S:-120} s; its log:" >&2
    tail -n 30 "$server_log" >&2
    exit 1
  fi
  sleep 0.2
done

echo "run-local: topk-server SERVING on $target (pid $server_pid, log $server_log)" >&2
grep -m1 'MPS: ' "$server_log" >&2 || echo "run-local: no MPS line in the log (CPU backend)" >&2
echo "# For the frontend (same user), then start it:"
if [ "$use_mps" != 0 ]; then
  echo "export CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY"
  echo "export CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY"
fi
echo "export TOPK_TARGET=$target"
echo "run-local: Ctrl-C stops the server and the daemon" >&2

set +e
wait "$server_pid"
status=$?
set -e
server_pid=
echo "run-local: topk-server exited with status $status" >&2
exit "$status"
