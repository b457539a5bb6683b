#!/usr/bin/env bash
# Builds the CUDA targets here and packs them (with their shared libraries)
# into .carry/dist for the device tool's `carry` (see scripts/device-gpu-check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TOPK_BUILD_DIR:-build-cuda}
cmake -S . -B "$build" -DTOPK_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" -j2 --target topk_cuda_test topk_cuda_planner_test topk_cuda_key_maps_test topk-bench-gpu \
  topk-plan topk_c
rm -rf .carry/dist
bash deploy/make-relocatable.sh .carry/dist "$build/tests/cuda/topk_cuda_test" "$build/tests/cuda/topk_cuda_key_maps_test" \
  "$build/tests/cuda/topk_cuda_planner_test" "$build/bench/gpu/topk-bench-gpu" \
  "$build/kernels/src/cuda/topk-plan" --lib "$build/kernels/src/cuda/libtopk_c.so"
strip .carry/dist/bin/* 2>/dev/null || true
du -sh .carry
