#!/usr/bin/env bash
# topk-server as a process: SIGTERM while topk-loadgen keeps it busy must
# drain and exit 0 (not die by the signal), logging "stopped".
# Usage: signal_test.sh TOPK_SERVER TOPK_LOADGEN
set -euo pipefail
source "$(dirname "$0")/server_port.sh"
server=$1 loadgen=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --max_rows=64 --max_width=65536 \
  --max_k=512 --drain_deadline=5s >"$log" 2>&1 &
pid=$!
port=$(listened_port "$log") || { kill -9 $pid; exit 1; }
"$loadgen" --target=127.0.0.1:$port --rows=16 --width=20000 --k=128 --concurrency=4 \
  --duration_s=3 --warmup_s=0 --progress=false >/dev/null 2>&1 &
load=$!
sleep 1
kill -TERM $pid
rc=0
wait $pid || rc=$?
wait $load || true  # its late calls fail with UNAVAILABLE once the server is gone
cat "$log"
[ $rc = 0 ] || { echo "server exit status $rc (want 0)"; exit 1; }
grep -q "received SIGTERM" "$log" && grep -q "stopped" "$log"
