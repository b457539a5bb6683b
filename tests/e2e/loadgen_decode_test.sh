#!/usr/bin/env bash
# topk-loadgen's decode-like mode against a real server process, with
# coalescing on and off: every answer verified, and the server-side batch
# sizes the calls saw in the report (above 1 on, exactly 1 off).
# Usage: loadgen_decode_test.sh TOPK_SERVER TOPK_LOADGEN
set -euo pipefail
source "$(dirname "$0")/server_port.sh"
server=$1 loadgen=$2
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -TERM $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

start() {  # start DELAY_US: one CPU worker, so concurrent calls queue
  "$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --workers=1 --cpu_threads=1 \
    --max_rows=64 --max_width=65536 --max_k=512 --max_queue_delay_us="$1" \
    >"$work/server.log" 2>&1 &
  pid=$!
  port=$(listened_port "$work/server.log")
}
stop() {
  kill -TERM $pid
  wait $pid
  pid=""
}
run() {  # run JSON
  "$loadgen" --target=127.0.0.1:$port --workload=decode --rows_per_request=1-8 --width=8192 \
    --k=64 --variants=6 --concurrency=8 --duration_s=1 --warmup_s=0.2 --verify_every=1 \
    --progress=false --json="$1" --csv="$1.csv" >"$work/table.txt"
  grep -q "batch" "$work/table.txt"
  head -1 "$1.csv" | grep -q "batch_mean,batch_max"
}
set -x
start 20000
run "$work/on.json"
stop
start 0
run "$work/off.json"
stop
python3 - "$work/on.json" "$work/off.json" <<'PY'
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:])
for run in (on, off):
    assert run["metadata"]["workload"] == "decode", run["metadata"]
    assert run["metadata"]["rows_source"].startswith("decode: 6 variants of 1-8 rows"), run
    s = run["steps"][0]
    assert s["requests"] > 0 and s["verified"] == s["requests"], s
    assert s["inexact"] == 0 and s["errors"] == 0, s
    # 1-8 rows per request: the mean request is between the two.
    assert 1 <= s["rows"] / s["requests"] <= 8, s
son, soff = on["steps"][0], off["steps"][0]
# Eight callers, one worker and a 20 ms window: calls share launches.
assert 1 < son["batch_mean"] <= son["batch_max"] <= 8, son
assert soff["batch_mean"] == 1 and soff["batch_max"] == 1, soff
PY
# A bad range is refused before any call.
! "$loadgen" --target=127.0.0.1:1 --workload=decode --rows_per_request=8-1 2>"$work/err.txt"
grep -q "rows_per_request=8-1" "$work/err.txt"
! "$loadgen" --target=127.0.0.1:1 --workload=prefill 2>"$work/err.txt"
grep -q "expected fixed or decode" "$work/err.txt"
