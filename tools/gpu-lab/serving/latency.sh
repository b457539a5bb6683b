# shellcheck shell=bash
# Latency by transport and call, and by score type (sourced by serving-h200.sh).

# Echo vs unary vs pipelined Select by reference (tiny rows); inline vs shm vs
# ipc, unary and pipelined, for 1 x 128K, 8 x 1M and 64 x 128K at 1 and 8
# clients (K = 2048); then coalescing's cost at 1 client (queue delay 0).
step_latency() {
  start_server
  log "Echo vs unary vs pipelined Select by reference (tiny rows)"
  timeout 120 "$bin/region_call_bench" --target="unix:$sock" --calls=20000 2>&1 |
    tee "$raw/call_bench.txt" | tail -8 | tee -a "$out/summary.txt"
  local shape tc rows width transport call
  for shape in "1 131072" "8 1048576" "64 131072"; do
    read -r rows width <<<"$shape"
    for tc in "inline unary" "shm unary" "shm pipeline" "$ipc unary" "$ipc pipeline"; do
      read -r transport call <<<"$tc"
      lg "lat-${rows}x${width}-$transport-$call" --transport="$transport" --call="$call" \
        --rows="$rows" --width="$width" --concurrency=1,8
    done
  done
  stop_server
  start_server --max_queue_delay_us=0
  lg "lat-1x131072-$ipc-pipeline-nocoalesce" --transport="$ipc" --call=pipeline --rows=1 \
    --width=131072 --concurrency=1,8
  stop_server
}

# FP32 vs BF16 vs FP16: 64 x 128K inline at 8 clients, 8 x 1M by IPC at 1 and 8.
step_dtype() {
  start_server
  local dtype
  for dtype in fp32 bf16 fp16; do
    lg "dtype-$dtype-64x131072" --dtype="$dtype" --rows=64 --width=131072 --concurrency=8
    lg "dtype-$dtype-8x1048576-$ipc" --dtype="$dtype" --transport="$ipc" --call=pipeline --rows=8 \
      --width=1048576 --concurrency=1,8
  done
  stop_server
}
