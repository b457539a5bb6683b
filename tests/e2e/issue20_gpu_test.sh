#!/usr/bin/env bash
# Issue 20's GPU checks, in one command from the repository root on a GPU
# machine (python3 with torch, grpcio, protobuf, numpy):
#   1. client/python/tests/inprocess_gpu_test.py: InProcessSelector against
#      torch.topk (FP32, BF16, K 512 and 2048, out=, values, NaN rows, a CUDA
#      graph captured once and replayed 100 times);
#   2. client/python/tests/limits_ipc_gpu_test.py: 2048 x 64K and 8192 x 128K
#      FP32 by CUDA IPC against a topk-server with the default limits.
# Builds what it needs into BUILD_DIR (default build-gpu, CUDA on, sm_90).
# Exit 0 only when both pass. Usage: bash tests/e2e/issue20_gpu_test.sh
set -uo pipefail
build=${BUILD_DIR:-build-gpu}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTOPK_CUDA=ON \
  -DTOPK_CUDA_ARCHITECTURES="${TOPK_CUDA_ARCHITECTURES:-90}" >/dev/null || exit 1
cmake --build "$build" -j"$(nproc)" --target topk-server topk_c topk_python_client >/dev/null ||
  exit 1
work=$(mktemp -d)
"$build/server/topk-server" --enable_regions --listen="unix:$work/topk.sock" --metrics_listen= \
  >"$work/server.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 300); do [ -S "$work/topk.sock" ] && break; sleep 0.1; done
[ -S "$work/topk.sock" ] || { cat "$work/server.log"; exit 1; }
grep -E "backend|limits:" "$work/server.log"
TOPK_LIBRARY=$PWD/$build/kernels/src/cuda/libtopk_c.so PYTHONPATH=$build/python \
  python3 client/python/tests/inprocess_gpu_test.py
inprocess=$?
PYTHONPATH=$build/python python3 client/python/tests/limits_ipc_gpu_test.py \
  --target "unix:$work/topk.sock"
limits=$?
echo "inprocess_gpu_test rc=$inprocess (77: skipped), limits_ipc_gpu_test rc=$limits"
[ "$inprocess" -eq 0 ] && [ "$limits" -eq 0 ]
