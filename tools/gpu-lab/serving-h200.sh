#!/usr/bin/env bash
# The serving checks and figures on a GPU machine, from a relocatable CUDA build
# (bin/, lib/, python/, proto/, python-tests/ under ROOT), in one call:
#   suites:   the region, pipeline, SIGBUS and coalescing suites on the CUDA
#             backend, the CUDA IPC region test (a second process exports), the
#             half-precision e2e suite, the Python/torch client across processes
#   latency:  Echo vs unary vs pipelined Select by reference (region_call_bench);
#             inline vs shm vs ipc, unary and pipelined, for 1 x 128K, 8 x 1M
#             and 64 x 128K at 1 and 8 clients (K = 2048), and coalescing's cost
#             at 1 client
#   decode:   64 clients x 4 rows x 256K over IPC and inline, coalescing on/off
#   workers:  the IPC decode load with 1, 2 and 4 workers per GPU, coalescing
#             off and on
#   diag:     the IPC decode load at 16/32/64 clients with the host's CPU use,
#             the server's CPU time and its threads' states
#   inline:   64 x 128K inline at 8 clients, the pinned-copy time of its bytes,
#             and one malloc arena against glibc's default
#   dtype:    FP32 vs BF16 vs FP16 inline, 8 clients
#   twogpu:   the decode load on one GPU vs both (when two are visible)
#   msgpath:  the message path's ceiling (issue 12): the IPC decode load with
#             the binaries of main (bin/*-main, when packed) against these
#             (row offsets in the region, and as one pitch),
#             absl's Mutex deadlock detection on/off per process, the Echo
#             ceiling, one GPU vs two, workers x coalescing, then the suites,
#             all inside MSGPATH_BUDGET_S seconds (default 190)
#   multigpu: issue 12's closing figures inside MULTIGPU_BUDGET_S (default 200):
#             the IPC decode load (64 clients, 4 x 256K) on one GPU vs two, as
#             one loadgen spread over the GPUs and as one process per GPU
#             (with and without answers read back), each run's server and
#             loadgen CPU seconds, per-GPU splits; main's binaries (-main) on
#             the same two-GPU load; inline 64 x 128K at 1 and 8 clients
#             (these, --copy_threads=8, main's) beside a pinned cudaMemcpy of
#             the same bytes; the suites; workers 1/2/4 x delay 0/100 on
#             fresh servers (1 s warm-up excluded)
#   staging:  the inline staging alone (staging_bench): copy threads x gRPC
#             slice sizes, the copy with and without the per-chunk upload,
#             against one pinned upload of the same 33.5 MB
#   i12d:     issue 12's last figures inside I12D_BUDGET_S (default 150): the
#             staging alone by threads, chunk and slice size, stores and
#             upload form; inline 64 x 128K with streaming vs cached stores
#             vs the previous server (-main); 64 rows per request by IPC
#             (256K and 1M wide, verified 1 in 1000) on one GPU vs two, with
#             each GPU's busy share; the suites and the torch client
# Every loadgen step verifies answers; one CSV (serving_h200.csv, a `run`
# column naming the configuration) and summary.txt go to OUT_DIR.
# Usage: serving-h200.sh ROOT OUT_DIR [steps]   (steps: comma separated)
set -uo pipefail
root=$(cd "$1" && pwd) out=$2
steps=${3:-suites,latency,decode,diag,inline,dtype,twogpu}
server_bin=topk-server loadgen_bin=topk-loadgen  # msgpath swaps in the -main builds
mkdir -p "$out"
bin=$root/bin raw=$out/raw
mkdir -p "$raw"
sock=/tmp/topk-serving.sock
csv=$out/serving_h200.csv
has() { [[ ",$steps," == *",$1,"* ]]; }
log() { echo "== $*" | tee -a "$out/summary.txt"; }
nvidia-smi -L | tee -a "$out/summary.txt"
gpus=$(nvidia-smi -L | wc -l)
server=
start_server() {  # flags...
  rm -f "$sock"
  "$bin/$server_bin" --backend="${SERVING_BACKEND:-cuda}" --enable_regions --enable_echo --listen="unix:$sock" \
    --metrics_listen= --max_k=2048 "$@" >>"$raw/server.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
}
stop_server() { [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server"; server=; }
trap stop_server EXIT
# lg RUN loadgen-flags...: one loadgen run, its steps appended to the CSV.
lg() {
  local run=$1
  shift
  timeout 90 "$bin/$loadgen_bin" --target="unix:$sock" --k=2048 --lengths=full --variants=2 \
    --duration_s=2 --warmup_s=0.5 --verify_every=20 --progress=false --csv="$raw/$run.csv" \
    "$@" >"$raw/$run.txt" 2>&1
  echo "$run rc=$?" >>"$out/summary.txt"
  [ -s "$csv" ] || { printf 'run,'; head -1 "$raw/$run.csv"; } >"$csv"
  tail -n +2 "$raw/$run.csv" | sed "s/^/$run,/" >>"$csv"
}

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# mg RUN "loadgen-a flags" ["loadgen-b flags"] (the multigpu and gpubound
# steps; they set left(), base and loadgen_bin): one or two loadgens at once
# on the running server (word-split flags); their steps go to the CSV as
# RUN-a / RUN-b, and summary.txt gets the host's busy share, the server's
# CPU seconds and each loadgen's rate and CPU seconds.
mg() {
  local run=$1 a=$2 b=${3:-} other=
  [ "$(left)" -gt 9 ] || { echo "$run skipped (budget)" | tee -a "$out/summary.txt"; return; }
  read -r _ u n sy _ _ irq sirq _ <<<"$(head -1 /proc/stat)"
  local busy0=$((u + n + sy + irq + sirq)) total0 srv0
  total0=$(awk 'NR==1 {t=0; for (i=2;i<=NF;i++) t+=$i; print t}' /proc/stat)
  srv0=$(cpu_of "$server")
  if [ -n "$b" ]; then
    # shellcheck disable=SC2086
    timeout 60 "$bin/$loadgen_bin" --target="unix:$sock" --k=2048 --lengths=full --variants=2 \
      --progress=false "${base[@]}" $b --csv="$raw/$run-b.csv" >"$raw/$run-b.txt" 2>&1 &
    other=$!
  fi
  # Which processes hold a context on which GPU, 2 s in (each loadgen
  # should be on its own GPU only).
  (sleep 2; nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader
    nvidia-smi -L; ps -eo pid,args | grep -E 'topk-(server|loadgen)' | grep -v grep) \
    >"$raw/$run.apps" 2>&1 &
  local apps=$!
  # Each GPU's busy share (kernels running) every 200 ms over the measured window.
  (sleep 1.2; timeout 1.8 nvidia-smi --query-gpu=index,utilization.gpu \
    --format=csv,noheader,nounits -lms 200) >"$raw/$run.util" 2>/dev/null &
  local util=$!
  # shellcheck disable=SC2086
  lg "$run-a" "${base[@]}" $a
  wait "$apps" "$util"
  # The server's CPU seconds so far by thread name (since this server started).
  for task in /proc/"$server"/task/*; do
    printf '%s %s\n' "$(tr ' ' _ <"$task/comm")" "$(awk '{print $14 + $15}' "$task/stat")"
  done 2>/dev/null | awk '{t[$1] += $2; n[$1]++} END {for (k in t) printf "%s x%d %d\n", k, n[k], t[k]}' |
    sort -k3 -nr >"$raw/$run.server-threads"
  if [ -n "$other" ]; then
    wait "$other"
    echo "$run-b rc=$?" >>"$out/summary.txt"
    tail -n +2 "$raw/$run-b.csv" | sed "s/^/$run-b,/" >>"$csv"
  fi
  read -r _ u n sy _ _ irq sirq _ <<<"$(head -1 /proc/stat)"
  local busy1=$((u + n + sy + irq + sirq)) total1
  total1=$(awk 'NR==1 {t=0; for (i=2;i<=NF;i++) t+=$i; print t}' /proc/stat)
  local line="$run: host busy $((100 * (busy1 - busy0) / (total1 - total0 + 1)))% of $(nproc)"
  line+=" cores, server cpu $(($(cpu_of "$server") - srv0))/100 s"
  for side in a b; do
    [ -s "$raw/$run-$side.txt" ] || continue
    line+="; $side: $(grep -E '^concurrency' "$raw/$run-$side.txt" |
      awk '{printf "%s req/s p50 %s ms", $3, $6}') $(grep -E 'client cpu|gpu[0-9]:' \
      "$raw/$run-$side.txt" | sed 's/^ *//' | tr '\n' ' ')"
  done
  line+="; gpu busy % (mean of samples): $(awk -F', *' '{s[$1] += $2; n[$1]++} END {
    for (g in s) printf "gpu%s %.0f ", g, s[g] / n[g]}' "$raw/$run.util" 2>/dev/null)"
  echo "$line" | tee -a "$out/summary.txt"
}

if has suites; then
  log "suites on the CUDA backend"
  for t in region_pipeline_test region_sigbus_test region_select_test region_fault_test \
    coalescing_test half_precision_test; do
    [ -x "$bin/$t" ] || { echo "$t: not packed" | tee -a "$out/summary.txt"; continue; }
    TOPK_TEST_BACKEND=cuda REGION_SESSION_CHILD=$bin/region_session_child timeout 120 "$bin/$t" \
      >"$raw/$t.log" 2>&1
    echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$raw/$t.log" | tr '\n' ' ')" |
      tee -a "$out/summary.txt"
  done
  TOPK_SERVER_BINARY=$bin/topk-server timeout 150 "$bin/region_cuda_test" \
    >"$raw/region_cuda_test.log" 2>&1
  echo "region_cuda_test rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$raw/region_cuda_test.log" |
    tr '\n' ' ')" | tee -a "$out/summary.txt"
  start_server
  log "Python/torch across processes"
  pyroot=$root/python
  # Stubs from this machine's own protoc when it has grpc_tools (its protobuf
  # runtime may be newer than the build machine's protoc).
  if python3 -c "import grpc_tools" 2>/dev/null; then
    rm -rf /tmp/pystubs && mkdir -p /tmp/pystubs && cp -r "$root/python/topk_client" /tmp/pystubs/ &&
      python3 -m grpc_tools.protoc --proto_path="$root/proto" \
        --python_out=/tmp/pystubs/topk_client/_proto \
        --grpc_python_out=/tmp/pystubs/topk_client/_proto "$root/proto/topk/v1/topk.proto" &&
      pyroot=/tmp/pystubs
  fi
  PYTHONPATH=$pyroot timeout 120 python3 "$root/python-tests/torch_ipc_test.py" \
    --target "unix:$sock" 2>&1 | tail -5 | tee -a "$out/summary.txt"
  stop_server
fi

if has latency; then
  start_server
  log "Echo vs unary vs pipelined Select by reference (tiny rows)"
  timeout 120 "$bin/region_call_bench" --target="unix:$sock" --calls=20000 2>&1 |
    tee "$raw/call_bench.txt" | tail -8 | tee -a "$out/summary.txt"
  for shape in "1 131072" "8 1048576" "64 131072"; do
    read -r rows width <<<"$shape"
    for tc in "inline unary" "shm unary" "shm pipeline" "ipc unary" "ipc pipeline"; do
      read -r transport call <<<"$tc"
      lg "lat-${rows}x${width}-$transport-$call" --transport="$transport" --call="$call" \
        --rows="$rows" --width="$width" --concurrency=1,8
    done
  done
  stop_server
  start_server --max_queue_delay_us=0
  lg "lat-1x131072-ipc-pipeline-nocoalesce" --transport=ipc --call=pipeline --rows=1 \
    --width=131072 --concurrency=1,8
  stop_server
fi

if has workers; then
  # The decode load by IPC against workers per GPU and coalescing: every
  # worker's launch fills the GPU, so few workers with large batches may beat
  # many with small ones.
  log "decode load by IPC (64 clients, 4 x 256K): workers per GPU x coalescing"
  for workers in 1 2 4; do
    for delay in 0 100; do
      start_server --cuda_devices=0 --workers=$workers --max_queue_delay_us=$delay
      lg "workers$workers-delay$delay-decode-ipc" --transport=ipc --call=pipeline \
        --workload=decode --rows_per_request=4 --width=262144 --concurrency=64 --duration_s=3 \
        --warmup_s=0.5 --verify_every=0
      stop_server
    done
  done
fi

if has diag; then
  # Where the decode load's time goes: host CPU busy share, the server's CPU
  # seconds and its threads' states, at 16, 32 and 64 clients, no verification.
  log "decode load by clients: host CPU, server CPU, server threads running (R) vs sleeping"
  echo "cores: $(nproc)" | tee -a "$out/summary.txt"
  start_server
  for c in 16 32 64; do
    read -r _ u n sy _ _ irq sirq _ <<<"$(head -1 /proc/stat)"
    busy0=$((u + n + sy + irq + sirq)) total0=$(awk 'NR==1 {t=0; for (i=2;i<=NF;i++) t+=$i; print t}' /proc/stat)
    srv0=$(awk '{print $14 + $15}' /proc/$server/stat)
    (for _ in $(seq 10); do sleep 0.4; cat /proc/$server/task/*/stat 2>/dev/null |
      awk '{print $3}' | sort | uniq -c | tr '\n' ' '; echo; done) >"$raw/threads-c$c.txt" &
    sampler=$!
    lg "diag-decode-ipc-c$c" --transport=ipc --call=pipeline --workload=decode \
      --rows_per_request=4 --width=262144 --concurrency=$c --duration_s=4 --warmup_s=0.5 \
      --verify_every=0
    wait $sampler
    read -r _ u n sy _ _ irq sirq _ <<<"$(head -1 /proc/stat)"
    busy1=$((u + n + sy + irq + sirq)) total1=$(awk 'NR==1 {t=0; for (i=2;i<=NF;i++) t+=$i; print t}' /proc/stat)
    srv1=$(awk '{print $14 + $15}' /proc/$server/stat)
    echo "c=$c host busy $(( 100 * (busy1 - busy0) / (total1 - total0) ))% of $(nproc) cores;" \
      "server cpu $(( (srv1 - srv0) ))/100 s over ~4.5 s; thread states (last sample):" \
      "$(tail -1 "$raw/threads-c$c.txt")" | tee -a "$out/summary.txt"
  done
  stop_server
fi

if has decode; then
  for delay in 0 default; do
    flags=()
    [ "$delay" = 0 ] && flags=(--max_queue_delay_us=0)
    start_server "${flags[@]}"
    lg "decode-ipc-delay$delay" --transport=ipc --call=pipeline --workload=decode \
      --rows_per_request=4 --width=262144 --concurrency=64 --duration_s=3
    lg "decode-inline-delay$delay" --workload=decode --rows_per_request=4 --width=262144 \
      --concurrency=64 --duration_s=3
    stop_server
  done
fi

if has inline; then
  log "pinned host-to-device copy of 64 x 128K FP32 (the inline path's reference)"
  timeout 60 python3 - <<'PY' 2>&1 | tee -a "$out/summary.txt"
import torch
n = 64 * 131072
src = torch.randn(n).pin_memory()
dst = torch.empty(n, device="cuda")
for _ in range(5):
    dst.copy_(src, non_blocking=True)
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
for _ in range(50):
    start.record(); dst.copy_(src, non_blocking=True); end.record(); end.synchronize()
    times.append(start.elapsed_time(end))
times.sort()
print("pinned_h2d_ms p50 %.3f min %.3f for %d bytes (%.1f GB/s)" %
      (times[25], times[0], n * 4, n * 4 / times[25] / 1e6))
PY
  for arenas in default 0; do
    flags=()
    [ "$arenas" = 0 ] && flags=(--malloc_arenas=0)
    start_server "${flags[@]}"
    lg "inline-64x131072-arenas$arenas" --rows=64 --width=131072 --concurrency=1,8
    stop_server
  done
fi

if has dtype; then
  start_server
  for dtype in fp32 bf16 fp16; do
    lg "dtype-$dtype-64x131072" --dtype=$dtype --rows=64 --width=131072 --concurrency=8
    lg "dtype-$dtype-8x1048576-ipc" --dtype=$dtype --transport=ipc --call=pipeline --rows=8 \
      --width=1048576 --concurrency=1,8
  done
  stop_server
fi

if has twogpu && [ "$gpus" -ge 2 ]; then
  log "decode load (2 x 32 clients, 4 x 256K, IPC) on one GPU vs both"
  for devices in 0 0,1; do
    label=${devices/,/+}
    start_server --cuda_devices=$devices
    second=1
    [ "$devices" = 0 ] && second=0
    # Two loadgens at once, one per exporting device (regions stay on their GPU).
    timeout 90 "$bin/topk-loadgen" --target="unix:$sock" --k=2048 --lengths=full --variants=2 \
      --duration_s=4 --warmup_s=1 --verify_every=20 --progress=false --transport=ipc \
      --call=pipeline --workload=decode --rows_per_request=4 --width=262144 --concurrency=32 \
      --ipc_device=$second --csv="$raw/twogpu-$label-b.csv" >"$raw/twogpu-$label-b.txt" 2>&1 &
    other=$!
    lg "twogpu-$label-a" --transport=ipc --call=pipeline --workload=decode \
      --rows_per_request=4 --width=262144 --concurrency=32 --ipc_device=0 --duration_s=4 \
      --warmup_s=1
    wait $other
    echo "twogpu-$label-b rc=$?" >>"$out/summary.txt"
    tail -n +2 "$raw/twogpu-$label-b.csv" | sed "s/^/twogpu-$label-b,/" >>"$csv"
    stop_server
  done
fi

if has msgpath; then
  budget=${MSGPATH_BUDGET_S:-190}
  began=$SECONDS
  left() { echo $((budget - (SECONDS - began))); }
  # The IPC decode load (4 x 256K per request, K = 2048), every 50th answer read
  # back and verified. Each run's line in summary.txt adds the host's busy share
  # and the server's CPU seconds over the run.
  decode=(--transport=ipc --call=pipeline --workload=decode --rows_per_request=4 --width=262144
    --verify_every=50)
  mp() {  # RUN loadgen-flags...
    local run=$1
    shift
    [ "$(left)" -gt 8 ] || { echo "$run skipped (budget)" | tee -a "$out/summary.txt"; return; }
    read -r _ u n sy _ _ irq sirq _ <<<"$(head -1 /proc/stat)"
    local busy0=$((u + n + sy + irq + sirq))
    local total0 srv0
    total0=$(awk 'NR==1 {t=0; for (i=2;i<=NF;i++) t+=$i; print t}' /proc/stat)
    srv0=$(awk '{print $14 + $15}' /proc/$server/stat)
    # The server's threads running (R) in samples over the measured window.
    (sleep 1; for _ in 1 2 3 4; do cat /proc/$server/task/*/stat 2>/dev/null |
      awk '$3 == "R" {r++} END {printf "%d ", r}'; sleep 0.4; done) >"$raw/$run.threads" &
    local sampler=$!
    lg "$run" "$@"
    wait $sampler
    read -r _ u n sy _ _ irq sirq _ <<<"$(head -1 /proc/stat)"
    local busy1=$((u + n + sy + irq + sirq))
    local total1 srv1
    total1=$(awk 'NR==1 {t=0; for (i=2;i<=NF;i++) t+=$i; print t}' /proc/stat)
    srv1=$(awk '{print $14 + $15}' /proc/$server/stat 2>/dev/null || echo "$srv0")
    echo "$run: host busy $((100 * (busy1 - busy0) / (total1 - total0)))% of $(nproc) cores," \
      "server cpu $((srv1 - srv0))/100 s, threads R $(cat "$raw/$run.threads" 2>/dev/null)" \
      "of $(ls /proc/$server/task 2>/dev/null | wc -l); $(grep -E '^concurrency' "$raw/$run.txt" |
        awk '{printf "c=%s %s req/s p50 %s ms; ", $2, $3, $6}')" | tee -a "$out/summary.txt"
  }
  log "msgpath: main's binaries against these, IPC decode load, 16/32/64 clients"
  if [ -x "$bin/topk-server-main" ] && [ -x "$bin/topk-loadgen-main" ]; then
    server_bin=topk-server-main loadgen_bin=topk-loadgen-main
    start_server
    mp "mp-main-decode" "${decode[@]}" --concurrency=16,32,64
    stop_server
    server_bin=topk-server loadgen_bin=topk-loadgen
  fi
  start_server
  mp "mp-new-decode" "${decode[@]}" --concurrency=16,32,64
  # Row starts as one pitch in the request: nothing read from device memory
  # before the queue.
  mp "mp-new-decode-pitch" "${decode[@]}" --concurrency=16,32,64 --row_layout=pitch
  stop_server
  log "msgpath: deadlock detection on in one process only (64 clients)"
  start_server --mutex_deadlock_detection=true
  mp "mp-detect-server-only" "${decode[@]}" --concurrency=64
  mp "mp-detect-both" "${decode[@]}" --concurrency=64 --mutex_deadlock_detection=true
  stop_server
  start_server
  mp "mp-detect-loadgen-only" "${decode[@]}" --concurrency=64 --mutex_deadlock_detection=true
  log "msgpath: Echo ceiling (unary, 256 B), detection off vs on"
  mp "mp-echo" --call=echo --rows=1 --width=1024 --concurrency=16,64
  stop_server
  start_server --mutex_deadlock_detection=true
  mp "mp-echo-detect" --call=echo --rows=1 --width=1024 --concurrency=16,64 --mutex_deadlock_detection=true
  stop_server
  # Two load generators on one GPU also say whether one loadgen process was
  # the limit; with two GPUs, one exporting process per GPU.
  log "msgpath: two loadgens x 32 clients on one GPU, and on two when there are two"
  devices_list=0
  [ "$gpus" -ge 2 ] && devices_list="0 0,1"
  if true; then
    for devices in $devices_list; do
      [ "$(left)" -gt 12 ] || break
      label=${devices/,/+}
      start_server --cuda_devices=$devices
      second=1
      [ "$devices" = 0 ] && second=0
      timeout 60 "$bin/topk-loadgen" --target="unix:$sock" --k=2048 --lengths=full --variants=2 \
        --duration_s=3 --warmup_s=0.5 --progress=false "${decode[@]}" --concurrency=32 \
        --ipc_device=$second --csv="$raw/mp-gpus-$label-b.csv" >"$raw/mp-gpus-$label-b.txt" 2>&1 &
      other=$!
      mp "mp-gpus-$label-a" "${decode[@]}" --concurrency=32 --ipc_device=0 --duration_s=3
      wait $other
      tail -n +2 "$raw/mp-gpus-$label-b.csv" | sed "s/^/mp-gpus-$label-b,/" >>"$csv"
      echo "mp-gpus-$label-b: $(grep -E '^concurrency' "$raw/mp-gpus-$label-b.txt" |
        awk '{printf "%s req/s p50 %s ms", $3, $6}')" | tee -a "$out/summary.txt"
      stop_server
    done
  fi
  log "msgpath: workers per GPU x coalescing (one GPU, 64 clients)"
  for workers in 1 2 4; do
    for delay in 0 100; do
      [ "$(left)" -gt 10 ] || break
      start_server --cuda_devices=0 --workers=$workers --max_queue_delay_us=$delay
      mp "mp-workers$workers-delay$delay" "${decode[@]}" --concurrency=64
      stop_server
    done
  done
  if [ "$(left)" -gt 40 ]; then
    log "msgpath: glibc's default malloc arenas against one (64 clients)"
    start_server --malloc_arenas=0
    mp "mp-arenas0" "${decode[@]}" --concurrency=64
    stop_server
  fi
  if [ "$(left)" -gt 40 ]; then
    log "msgpath: the server on gRPC's poll() engine instead of epoll1 (64 clients)"
    GRPC_POLL_STRATEGY=poll start_server
    mp "mp-pollserver" "${decode[@]}" --concurrency=64
    stop_server
  fi
  log "msgpath: suites on the CUDA backend (within the budget)"
  for t in coalescing_test region_pipeline_test region_select_test region_fault_test \
    region_sigbus_test half_precision_test; do
    limit=$(($(left) - 5))
    [ "$limit" -gt 5 ] || { echo "$t skipped (budget)" | tee -a "$out/summary.txt"; continue; }
    [ -x "$bin/$t" ] || { echo "$t: not packed" | tee -a "$out/summary.txt"; continue; }
    TOPK_TEST_BACKEND=cuda REGION_SESSION_CHILD=$bin/region_session_child timeout "$limit" \
      "$bin/$t" >"$raw/$t.log" 2>&1
    echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$raw/$t.log" | tr '\n' ' ')" |
      tee -a "$out/summary.txt"
  done
  limit=$(($(left) - 3))
  if [ "$limit" -gt 10 ]; then
    TOPK_SERVER_BINARY=$bin/topk-server timeout "$limit" "$bin/region_cuda_test" \
      >"$raw/region_cuda_test.log" 2>&1
    echo "region_cuda_test rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$raw/region_cuda_test.log" |
      tr '\n' ' ')" | tee -a "$out/summary.txt"
  fi
  echo "msgpath: $((SECONDS - began)) s of $budget" | tee -a "$out/summary.txt"
fi

if has multigpu; then
  budget=${MULTIGPU_BUDGET_S:-200}
  began=$SECONDS
  left() { echo $((budget - (SECONDS - began))); }
  tr=${SERVING_TRANSPORT:-ipc}  # shm: a dry run of this step without a GPU
  decode=(--transport="$tr" --call=pipeline --workload=decode --rows_per_request=4 --width=262144
    --duration_s=2 --warmup_s=1)
  base=("${decode[@]}")  # what mg's loadgens run with; the Echo runs swap it
  log "multigpu: IPC decode load, 64 clients, one GPU vs two (these binaries, then main's)"
  two=0
  [ "$gpus" -ge 2 ] && two=1
  if [ "$two" = 1 ]; then
    start_server --cuda_devices=0,1
    mg "g2-one" "--concurrency=64 --ipc_device=0,1 --verify_every=50"
    mg "g2-two" "--concurrency=32 --ipc_device=0 --verify_every=50" \
      "--concurrency=32 --ipc_device=1 --verify_every=50"
    mg "g2-two-noread" "--concurrency=32 --ipc_device=0 --verify_every=0" \
      "--concurrency=32 --ipc_device=1 --verify_every=0"
    # The two-GPU server with all of the load on GPU 0: the server's second
    # device alone, without a loadgen or requests on GPU 1.
    mg "g2-two-on0" "--concurrency=32 --ipc_device=0 --verify_every=50" \
      "--concurrency=32 --ipc_device=0 --verify_every=50"
    # A load the GPUs bound instead of the message path: 64 x 256K per request.
    mg "g2-big" "--workload=fixed --rows=64 --concurrency=32 --ipc_device=0,1 --verify_every=50"
    stop_server
    # As many workers in all as the one-GPU server has (2 per GPU).
    start_server --cuda_devices=0,1 --workers=2
    mg "g2w2-one" "--concurrency=64 --ipc_device=0,1 --verify_every=50"
    stop_server
  fi
  start_server --cuda_devices=0
  mg "g1-one" "--concurrency=64 --ipc_device=0 --verify_every=50"
  mg "g1-two" "--concurrency=32 --ipc_device=0 --verify_every=50" \
    "--concurrency=32 --ipc_device=0 --verify_every=50"
  mg "g1-big" "--workload=fixed --rows=64 --concurrency=32 --ipc_device=0 --verify_every=50"
  # The transport's ceiling on this host: unary Echo of 256 B, 64 callers in
  # one process and in two.
  base=(--call=echo --rows=1 --width=1024 --duration_s=2 --warmup_s=1)
  mg "echo-one" "--concurrency=64"
  mg "echo-two" "--concurrency=32" "--concurrency=32"
  base=("${decode[@]}")
  stop_server
  if [ "$two" = 1 ] && [ -x "$bin/topk-server-main" ] && [ -x "$bin/topk-loadgen-main" ]; then
    server_bin=topk-server-main loadgen_bin=topk-loadgen-main
    start_server --cuda_devices=0,1
    mg "main-g2-two" "--concurrency=32 --ipc_device=0 --verify_every=50" \
      "--concurrency=32 --ipc_device=1 --verify_every=50"
    stop_server
    server_bin=topk-server loadgen_bin=topk-loadgen
  fi
  log "multigpu: inline 64 x 128K, pinned copy of the same bytes, then the server"
  timeout 40 python3 - <<'PY' 2>&1 | tee -a "$out/summary.txt"
import torch
n = 64 * 131072
src = torch.randn(n).pin_memory()
dst = torch.empty(n, device="cuda")
for _ in range(5):
    dst.copy_(src, non_blocking=True)
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
for _ in range(50):
    start.record(); dst.copy_(src, non_blocking=True); end.record(); end.synchronize()
    times.append(start.elapsed_time(end))
times.sort()
print("pinned_h2d_ms p50 %.3f min %.3f for %d bytes (%.1f GB/s)" %
      (times[25], times[0], n * 4, n * 4 / times[25] / 1e6))
PY
  for variant in new copy8 main; do
    [ "$(left)" -gt 12 ] || { echo "inline-$variant skipped (budget)" | tee -a "$out/summary.txt"; continue; }
    flags=(--cuda_devices=0)
    [ "$variant" = copy8 ] && flags+=(--copy_threads=8)
    if [ "$variant" = main ]; then
      [ -x "$bin/topk-server-main" ] || continue
      server_bin=topk-server-main
    fi
    start_server "${flags[@]}"
    lg "inline-64x131072-$variant" --rows=64 --width=131072 --concurrency=1,8 --duration_s=1.5 \
      --warmup_s=0.5 --verify_every=10
    echo "inline-$variant: $(grep -E '^concurrency' "$raw/inline-64x131072-$variant.txt" |
      awk '{printf "c=%s %s req/s p50 %s ms srv %s ms; ", $2, $3, $6, $11}')" |
      tee -a "$out/summary.txt"
    stop_server
    server_bin=topk-server
  done
  log "multigpu: workers per GPU x coalescing, fresh servers on GPU 0, 64 clients"
  for workers in 4 2 1; do
    for delay in 0 100; do
      # The suites after this need about a minute.
      [ "$(left)" -gt 70 ] || { echo "w$workers-d$delay skipped (budget)" | tee -a "$out/summary.txt"; continue; }
      start_server --cuda_devices=0 --workers=$workers --max_queue_delay_us=$delay
      mg "w$workers-d$delay" "--concurrency=64 --ipc_device=0 --verify_every=50 --duration_s=2"
      stop_server
    done
  done
  log "multigpu: suites on the CUDA backend"
  for t in coalescing_test region_pipeline_test region_select_test region_fault_test \
    region_sigbus_test half_precision_test; do
    limit=$(($(left) - 3))
    [ "$limit" -gt 5 ] || { echo "$t skipped (budget)" | tee -a "$out/summary.txt"; continue; }
    [ -x "$bin/$t" ] || { echo "$t: not packed" | tee -a "$out/summary.txt"; continue; }
    t0=$SECONDS
    TOPK_TEST_BACKEND=cuda REGION_SESSION_CHILD=$bin/region_session_child timeout "$limit" \
      "$bin/$t" >"$raw/$t.log" 2>&1
    echo "$t rc=$? $((SECONDS - t0)) s $(grep -E '^\[  (PASSED|FAILED)' "$raw/$t.log" |
      tr '\n' ' ')" | tee -a "$out/summary.txt"
  done
  limit=$(($(left) - 3))
  if [ "$limit" -gt 10 ] && [ -x "$bin/region_cuda_test" ]; then
    t0=$SECONDS
    TOPK_SERVER_BINARY=$bin/topk-server timeout "$limit" "$bin/region_cuda_test" \
      >"$raw/region_cuda_test.log" 2>&1
    echo "region_cuda_test rc=$? $((SECONDS - t0)) s $(grep -E '^\[  (PASSED|FAILED)' \
      "$raw/region_cuda_test.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
  else
    echo "region_cuda_test skipped (budget)" | tee -a "$out/summary.txt"
  fi
  echo "multigpu: $((SECONDS - began)) s of $budget" | tee -a "$out/summary.txt"
fi

if has i12d; then
  # Issue 12's last figures inside I12D_BUDGET_S (default 150), the suites
  # first (the validation must not be the part cut for time; region_cuda_test
  # and the torch client run beside the others: checks, not timings); then
  # the staging alone (staging_bench); 64 x 128K inline at 1 and 8 clients
  # with this server (streaming stores, in-order uploads), the same with
  # cached stores, and the previous server (-main: per-chunk uploads from
  # every copying thread, cached stores); then a load the GPUs bound (64 rows
  # per request by IPC, answers verified 1 in 1000) on one GPU vs two, as one
  # loadgen spread over both and one per GPU, same total clients, with each
  # GPU's busy share.
  budget=${I12D_BUDGET_S:-150}
  began=$SECONDS
  left() { echo $((budget - (SECONDS - began))); }
  log "i12d: suites on the CUDA backend"
  (TOPK_SERVER_BINARY=$bin/topk-server timeout 70 "$bin/region_cuda_test" \
    >"$raw/region_cuda_test.log" 2>&1; echo "region_cuda_test rc=$?" >"$raw/region_cuda_test.rc") &
  cuda_ipc=$!
  (pysock=/tmp/topk-serving-py.sock
    rm -f "$pysock"
    "$bin/topk-server" --backend=cuda --enable_regions --listen="unix:$pysock" --metrics_listen= \
      --max_k=2048 >"$raw/py-server.log" 2>&1 &
    pyserver=$!
    for _ in $(seq 300); do [ -S "$pysock" ] && break; sleep 0.1; done
    pyroot=$root/python
    # Stubs from this machine's own protoc when it has one (as the suites step).
    if python3 -c "import grpc_tools" 2>/dev/null; then
      rm -rf /tmp/pystubs && mkdir -p /tmp/pystubs && cp -r "$root/python/topk_client" /tmp/pystubs/ &&
        python3 -m grpc_tools.protoc --proto_path="$root/proto" \
          --python_out=/tmp/pystubs/topk_client/_proto \
          --grpc_python_out=/tmp/pystubs/topk_client/_proto "$root/proto/topk/v1/topk.proto" &&
        pyroot=/tmp/pystubs
    fi
    PYTHONPATH=$pyroot timeout 60 python3 "$root/python-tests/torch_ipc_test.py" \
      --target "unix:$pysock" >"$raw/torch_ipc_test.log" 2>&1
    echo "torch_ipc_test rc=$?" >"$raw/torch_ipc_test.rc"
    kill -TERM "$pyserver"; wait "$pyserver") &
  torch_ipc=$!
  for t in coalescing_test region_pipeline_test region_select_test region_fault_test \
    region_sigbus_test half_precision_test; do
    [ -x "$bin/$t" ] || { echo "$t: not packed" | tee -a "$out/summary.txt"; continue; }
    t0=$SECONDS
    TOPK_TEST_BACKEND=cuda REGION_SESSION_CHILD=$bin/region_session_child timeout 60 \
      "$bin/$t" >"$raw/$t.log" 2>&1
    echo "$t rc=$? $((SECONDS - t0)) s $(grep -E '^\[  (PASSED|FAILED)' "$raw/$t.log" |
      tr '\n' ' ')" | tee -a "$out/summary.txt"
  done
  wait "$cuda_ipc" "$torch_ipc"
  echo "$(cat "$raw/region_cuda_test.rc") $(grep -E '^\[  (PASSED|FAILED)' \
    "$raw/region_cuda_test.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
  echo "$(cat "$raw/torch_ipc_test.rc") $(tail -3 "$raw/torch_ipc_test.log" | tr '\n' ' ')" |
    tee -a "$out/summary.txt"
  log "i12d: the inline staging alone (64 x 128K FP32), GPU 0"
  if [ -x "$bin/staging_bench" ]; then
    timeout 40 "$bin/staging_bench" --threads=1,4,8,16 --slice_bytes=16384,262144,33554432 \
      --chunk_bytes=262144,524288,2097152 --repeats=9 >"$out/staging_bench.txt" 2>&1
    echo "staging_bench rc=$? $((SECONDS - began)) s" | tee -a "$out/summary.txt"
  fi
  log "i12d: inline 64 x 128K: streaming vs cached stores vs the previous server"
  for variant in new cached main; do
    [ "$(left)" -gt 55 ] || { echo "inline-$variant skipped (budget)" | tee -a "$out/summary.txt"; continue; }
    flags=(--cuda_devices=0)
    [ "$variant" = cached ] && flags+=(--staging_streaming_stores=false)
    if [ "$variant" = main ]; then
      [ -x "$bin/topk-server-main" ] || continue
      server_bin=topk-server-main
    fi
    start_server "${flags[@]}"
    lg "inline-64x131072-$variant" --rows=64 --width=131072 --concurrency=1,8 --duration_s=1 \
      --warmup_s=0.3 --verify_every=10
    echo "inline-$variant: $(grep -E '^concurrency' "$raw/inline-64x131072-$variant.txt" |
      awk '{printf "c=%s %s req/s p50 %s ms srv %s ms; ", $2, $3, $6, $11}')" |
      tee -a "$out/summary.txt"
    stop_server
    server_bin=topk-server
  done
  log "i12d: 64 rows per request by IPC (GPU-bound), one GPU vs two, 32 clients in all"
  if [ "$gpus" -ge 2 ]; then
    for width in 262144 1048576; do
      [ "$(left)" -gt 24 ] || { echo "big-$width skipped (budget)" | tee -a "$out/summary.txt"; continue; }
      base=(--transport=ipc --call=pipeline --workload=fixed --rows=64 --width=$width
        --duration_s=2 --warmup_s=1 --verify_every=1000)
      start_server --cuda_devices=0,1
      mg "big$width-g2-one" "--concurrency=32 --ipc_device=0,1"
      mg "big$width-g2-two" "--concurrency=16 --ipc_device=0" "--concurrency=16 --ipc_device=1"
      stop_server
      start_server --cuda_devices=0
      mg "big$width-g1-one" "--concurrency=32 --ipc_device=0"
      stop_server
    done
  fi
  echo "i12d: $((SECONDS - began)) s of $budget" | tee -a "$out/summary.txt"
fi

if has staging && [ -x "$bin/staging_bench" ]; then
  log "inline staging alone (64 x 128K FP32): copy threads x slice sizes, GPU 0"
  timeout 120 "$bin/staging_bench" --threads=1,2,4,8,16 --slice_bytes=16384,262144,4194304 \
    --repeats=20 2>&1 | tee -a "$out/summary.txt"
  echo "staging_bench rc=${PIPESTATUS[0]}" | tee -a "$out/summary.txt"
fi

log "results"
[ -s "$csv" ] && python3 - "$csv" <<'PY' | tee -a "$out/summary.txt"
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print("%-42s c=%-3s req/s=%9s p50=%7s p99=%7s srv=%7s dev=%7s batch=%6s inexact=%s err=%s" % (
        r["run"], r["setting"], r["req_per_s"], r["p50_us"], r["p99_us"], r["server_total_us"],
        r["server_device_us"], r["batch_mean"], r["inexact"], r["errors"]))
PY
tar -C "$out" -czf "$out/raw.tgz" raw && rm -rf "$raw"
