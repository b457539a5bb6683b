#!/usr/bin/env bash
# Zero-copy serving on a GPU machine, from a relocatable build (bin/, lib/,
# python/ stubs and the Python tests beside this script): the CUDA IPC region
# tests (C++, a second process exports memory), the shared-memory region
# suites on the CUDA backend, the Python/torch client across processes, and
# the latency table inline vs shm vs ipc (1 x 128K, 8 x 1M, 64 x 128K, K=2048,
# 1 and 8 clients) written as CSV.
# Usage: regions-h200.sh RELOCATED_ROOT OUT_DIR [python]
# (`python`: only the Python/torch part.)
set -uo pipefail
only=${3:-all}
root=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
bin=$root/bin
sock=/tmp/topk-regions.sock
log() { echo "== $*" | tee -a "$out/summary.txt"; }
nvidia-smi -L | tee -a "$out/summary.txt"

if [ "$only" = all ]; then
log "C++ CUDA IPC region tests (the test process exports, a topk-server process selects)"
TOPK_SERVER_BINARY=$bin/topk-server timeout 120 "$bin/region_cuda_test" >"$out/region_cuda_test.log" 2>&1
echo "rc=$?" | tee -a "$out/summary.txt"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|OK \]|FAILED \]" "$out/region_cuda_test.log" | tee -a "$out/summary.txt"

log "shared-memory region suites on the CUDA backend"
for t in region_select_test region_fault_test region_lifetime_test; do
  TOPK_TEST_BACKEND=cuda REGION_SESSION_CHILD=$bin/region_session_child timeout 120 "$bin/$t" \
    >"$out/$t.log" 2>&1
  echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/$t.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
done
fi

rm -f "$sock"
"$bin/topk-server" --backend=cuda --enable_regions --listen="unix:$sock" --metrics_listen= \
  --max_k=2048 >"$out/server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done

log "Python/torch across processes"
py=$(command -v python3)
pyroot=$root/python
# Stubs from this machine's own protoc when it has grpc_tools (its protobuf
# runtime may be newer than the build machine's protoc).
if "$py" -c "import grpc_tools" 2>/dev/null; then
  mkdir -p /tmp/pystubs && cp -r "$root/python/topk_client" /tmp/pystubs/ &&
    "$py" -m grpc_tools.protoc --proto_path="$root/proto" --python_out=/tmp/pystubs/topk_client/_proto \
      --grpc_python_out=/tmp/pystubs/topk_client/_proto "$root/proto/topk/v1/topk.proto" &&
    pyroot=/tmp/pystubs
fi
PYTHONPATH=$pyroot timeout 120 "$py" "$root/python-tests/torch_ipc_test.py" --target "unix:$sock" \
  2>&1 | tail -5 | tee -a "$out/summary.txt"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTHONPATH=$pyroot timeout 60 "$py" \
  "$root/python-tests/torch_ipc_test.py" --target "unix:$sock" --expect_unexportable 2>&1 |
  tail -3 | tee -a "$out/summary.txt"

[ "$only" = python ] && exit 0
log "latency: inline vs shm vs ipc over the unix socket"
csv=$out/server_h200_regions.csv
echo "rows,width,transport,mode,concurrency,req_s,rows_s,gb_s,p50_ms,p90_ms,p99_ms,srv_ms,queue_ms,dev_ms,checked,inexact,errors" >"$csv"
for shape in "1 131072" "8 1048576" "64 131072"; do
  set -- $shape
  for transport in inline shm ipc; do
    timeout 60 "$bin/topk-loadgen" --target="unix:$sock" --transport="$transport" --rows="$1" \
      --width="$2" --k=2048 --lengths=full --variants=2 --concurrency=1,8 --duration_s=2 \
      --warmup_s=0.5 --verify_every=25 --progress=false >"$out/lg.txt" 2>&1
    echo "$1x$2 $transport rc=$?" >>"$out/loadgen.log"
    cat "$out/lg.txt" >>"$out/loadgen.log"
    awk -v r="$1" -v w="$2" -v t="$transport" '/^concurrency/ {
      printf "%s,%s,%s,%s", r, w, t, $1; for (i = 2; i <= NF; i++) printf ",%s", $i; print "" }' \
      "$out/lg.txt" >>"$csv"
  done
done
tr ',' '\t' <"$csv" | tee -a "$out/summary.txt"

if command -v nsys >/dev/null; then
  log "copies on the ipc path (nsys: every memcpy the server made for 300 x 64x128K requests)"
  kill -TERM $server; wait $server
  rm -f "$sock"
  timeout 120 nsys profile -o /tmp/ipc --force-overwrite true --trace=cuda "$bin/topk-server" \
    --backend=cuda --enable_regions --listen="unix:$sock" --metrics_listen= --max_k=2048 \
    >"$out/nsys-server.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
  timeout 60 "$bin/topk-loadgen" --target="unix:$sock" --transport=ipc --rows=64 --width=131072 \
    --k=2048 --lengths=full --variants=1 --concurrency=1 --duration_s=1 --warmup_s=0 \
    --verify_every=0 --progress=false >/dev/null 2>&1
  kill -INT $server; wait $server
  nsys stats --report cuda_gpu_mem_size_sum /tmp/ipc.nsys-rep 2>/dev/null | tail -12 |
    tee -a "$out/summary.txt"
fi
