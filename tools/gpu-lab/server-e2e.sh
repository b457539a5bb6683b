#!/usr/bin/env bash
# The server on a GPU, in ONE device call (repo root on the GPU machine, the
# relocatable build of tools/gpu-lab/pack-server.sh carried in .carry/server):
#   1. the server test suites in-process on the CUDA backend
#      (TOPK_TEST_BACKEND=cuda: e2e exactness, every bad input incl. NaN rows,
#      32 x 200 concurrency, shutdown, health, reflection, RSS);
#   2. topk-server --backend=cuda on a free loopback port + topk-loadgen on
#      causal indexer rows, EVERY answer verified, unary and streamed, FP32
#      and BF16 (half the bytes per request);
#   The loadgen's srv_ms vs dev_ms columns give the server's overhead.
# Logs and CSVs go to $OUT; a table is printed last. usage: [smoke|full]
set -uo pipefail
mode=${1:-full}
OUT=${OUT:-/tmp/topk-server-out}
mkdir -p "$OUT"
bin=${TOPK_SERVER_DIST:-.carry/server}/bin
seconds=3; [ "$mode" = smoke ] && seconds=1
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv | tee "$OUT/gpu.txt"

echo "== 1. server suites on the CUDA backend"
suite_rc=0
for t in e2e_test bad_input_test concurrency_test shutdown_test health_reflection_test rss_test \
    engine_tls_test raw_select_test row_source_test raw_select_fuzz_test half_precision_test; do
  [ -x "$bin/$t" ] || { printf '   %-24s not packed\n' "$t"; continue; }
  TOPK_TEST_BACKEND=cuda timeout 300 "$bin/$t" --gtest_brief=1 >"$OUT/$t.log" 2>&1
  rc=$?; [ $rc = 0 ] || suite_rc=1
  printf '   %-24s rc=%d  %s\n' "$t" "$rc" "$(grep -E '^\[  (PASSED|FAILED)' "$OUT/$t.log" | tr '\n' ' ')"
done

echo "== 2. topk-server --backend=cuda + topk-loadgen (every answer verified)"
log=$OUT/server.log
"$bin/topk-server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend=cuda \
  --max_rows=4096 --max_width=1048576 --max_k=2048 --max_batch_bytes=$((512 << 20)) \
  --max_recv_message_bytes=$((512 << 20)) --max_send_message_bytes=$((512 << 20)) >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
port=""
for _ in $(seq 600); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | cut -d: -f2)
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then cat "$log"; echo "server did not start"; exit 1; fi
target=127.0.0.1:$port
"$bin/topk-cli" info --target=$target | grep -E 'backend|name|uuid|usable' | tee "$OUT/info.txt"
load_rc=0
run() {  # name, loadgen args...
  local name=$1; shift
  "$bin/topk-loadgen" --target=$target --distribution=indexer --lengths=causal --k=2048 \
    --verify_every=1 --duration_s=$seconds --warmup_s=1 --progress=false \
    --csv="$OUT/$name.csv" "$@" >"$OUT/$name.txt" 2>&1 || load_rc=1
  echo "-- $name: $*"; tail -n +2 "$OUT/$name.txt"
}
run decode_64x128K --rows=64 --width=131072 --concurrency=1,4,8
run decode_64x128K_bf16 --rows=64 --width=131072 --concurrency=1,4,8 --dtype=bf16
run prefill_512x128K --rows=512 --width=131072 --concurrency=1,4
[ "$mode" = smoke ] || run prefill_512x256K_stream --rows=512 --width=262144 --stream \
  --concurrency=1,2 --variants=2
"$bin/topk-cli" stats --target=$target --prometheus >"$OUT/metrics.txt"
kill -TERM $pid; wait $pid
tail -2 "$log"
echo "suites rc=$suite_rc  loadgen rc=$load_rc (0: all exact, no errors)"
[ $suite_rc = 0 ] && [ $load_rc = 0 ]
