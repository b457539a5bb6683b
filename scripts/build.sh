#!/usr/bin/env bash
# Configures and builds into build/ (CUDA when nvcc is usable, else CPU only).
# Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
build_dir=${TOPK_BUILD_DIR:-build}
jobs=${TOPK_JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
