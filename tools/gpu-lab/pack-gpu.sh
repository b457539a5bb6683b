#!/usr/bin/env bash
# Builds the CUDA targets here (sm_90 by default) and packs them, with the
# non-system shared libraries they need, into .carry/gpu/ (bin/, lib/, rpath
# $ORIGIN/../lib) for the device tool's `carry`; gpu-check.sh runs them there.
# TOPK_BASELINE=<commit>: also builds that commit's topk-bench-gpu (in a git
# worktree beside the build) and packs it as bin/topk-bench-gpu-baseline, so
# one device call can time the old and the new kernels side by side.
# TOPK_VARIANTS="name=commit ...": each commit's topk-bench-gpu (one worktree
# and build beside this one, rebuilt per commit) as bin/v/<name>, "name=."
# this tree's: decode-peers.sh variants times them side by side.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${TOPK_BUILD_DIR:-build-gpu-lab}
arch=${TOPK_CUDA_ARCH:-90}
jobs=${TOPK_JOBS:-2}
dest=.carry/gpu
cmake -S . -B "$build" -DTOPK_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
cmake --build "$build" -j "$jobs" --target topk_cuda_test topk_cuda_key_maps_test \
  cuda_planner_test topk-bench-gpu topk-plan topk_c
bins=("$build/tests/kernels/cuda/topk_cuda_test" "$build/tests/kernels/cuda/topk_cuda_key_maps_test"
      "$build/tests/kernels/planner/cuda_planner_test" "$build/bench/gpu/topk-bench-gpu"
      "$build/kernels/src/cuda/topk-plan")
# Another commit's topk-bench-gpu, built in a worktree and build folder
# beside this one (<folder>-src, <folder>; rebuilt incrementally per commit),
# copied to <out>.
bench_at() {  # commit folder out
  local src=$2-src
  [ -e "$src/.git" ] || git worktree add --force --detach "$src" "$1" >/dev/null
  git -C "$src" checkout --quiet --detach "$1"
  cmake -S "$src" -B "$2" -DTOPK_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
  cmake --build "$2" -j "$jobs" --target topk-bench-gpu
  cp "$2/bench/gpu/topk-bench-gpu" "$3"
}
if [ -n "${TOPK_BASELINE:-}" ]; then
  bench_at "$TOPK_BASELINE" "$build-baseline" "$build/topk-bench-gpu-baseline"
  bins+=("$build/topk-bench-gpu-baseline")
fi
variants=()
for spec in ${TOPK_VARIANTS:-}; do
  name=${spec%%=*} rev=${spec#*=}
  if [ "$rev" = . ]; then
    cp "$build/bench/gpu/topk-bench-gpu" "$build/variant-$name"
  else
    bench_at "$rev" "$build-variant" "$build/variant-$name"
  fi
  variants+=("$name")
done
rm -rf "$dest"
bash deploy/make-relocatable.sh "$dest" "${bins[@]}" --lib "$build/kernels/src/cuda/libtopk_c.so"
strip "$dest"/bin/* 2>/dev/null || true
for name in "${variants[@]}"; do
  mkdir -p "$dest/bin/v"
  cp "$build/variant-$name" "$dest/bin/v/$name" && strip "$dest/bin/v/$name"
done
du -sh "$dest"
