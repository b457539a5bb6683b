#!/usr/bin/env bash
# topk-cli and topk-loadgen against a real server process: select (generated
# rows, saved), replay of the saved file (streamed), info/stats/health, and
# both load modes with every answer verified; CSV and JSON written.
# Usage: tools_test.sh TOPK_SERVER TOPK_CLI TOPK_LOADGEN
set -euo pipefail
server=$1 cli=$2 loadgen=$3
work=$(mktemp -d)
"$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --max_rows=64 --max_width=65536 \
  --max_k=512 --log_level=debug >"$work/server.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
port=""
for _ in $(seq 100); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$work/server.log" | cut -d: -f2 || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/server.log"; exit 1; }
t=--target=127.0.0.1:$port
set -x
[ "$("$cli" health $t)" = SERVING ]
"$cli" info $t | grep 'backend: "cpu"' >/dev/null
"$cli" select $t --rows=8 --width=30000 --k=100 --distribution=bf16_ties --lengths=random \
  --sorted --save="$work/rows.bin" --output="$work/indices.bin"
[ "$(stat -c %s "$work/indices.bin")" = $((8 * 100 * 4)) ]
"$cli" replay $t --input="$work/rows.bin" --k=100 --repeat=3 --stream --chunk_bytes=50000
! "$cli" select $t --rows=8 --width=100 --k=513 2>"$work/err.txt"
grep -q "INVALID_ARGUMENT" "$work/err.txt"
"$loadgen" $t --rows=8 --width=20000 --k=64 --concurrency=1,3 --duration_s=1 --warmup_s=0.2 \
  --verify_every=1 --progress=false --csv="$work/c.csv" --json="$work/c.json"
"$loadgen" $t --rows=8 --width=20000 --k=64 --request_rate=40 --duration_s=1 --warmup_s=0.2 \
  --verify_every=1 --progress=false --csv="$work/r.csv"
"$loadgen" $t --rows=4 --width=20000 --k=64 --request_rate=20 --stream --duration_s=1 \
  --warmup_s=0.2 --verify_every=1 --progress=false
[ "$(wc -l <"$work/c.csv")" = 3 ] && [ "$(wc -l <"$work/r.csv")" = 2 ]
grep -q '"mode": "concurrency"' "$work/c.json"
"$cli" stats $t | grep "requests:" >/dev/null
"$cli" stats $t | grep -E "^total +[0-9]+" >/dev/null
"$cli" stats $t --json | python3 -c 'import json, sys; s = json.load(sys.stdin); assert s["requests"] > 0 and s["latency"]["total"]["p99_us"] > 0, s'
# Help per command, and the valid choices in errors.
"$cli" help select | grep -q -- "--distribution"
"$cli" replay --help | grep -q -- "--repeat"
! "$cli" help select | grep -q -- "--prometheus"
! "$cli" bogus $t 2>"$work/err.txt"
grep -q "select, replay, info, stats, health" "$work/err.txt"
! "$cli" select $t --distribution=nope 2>"$work/err.txt"
grep -q "bf16_ties" "$work/err.txt"
"$cli" stats $t --prometheus | grep '^topk_requests_total' >/dev/null
# The server's log: the startup summary, one line per request at debug, and
# failures with their cause.
grep -q "limits: max_k 512, max_rows 64" "$work/server.log"
grep -q "memory at start:" "$work/server.log"
grep -Eq "select ok: 8 rows, k = 100, [0-9]+ us" "$work/server.log"
grep -q "failed: INVALID_ARGUMENT: k = 513 is out of range" "$work/server.log"
