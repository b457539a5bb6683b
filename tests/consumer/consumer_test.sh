#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then configures, builds and
# runs tests/consumer against it with find_package(topk): what a downstream
# project does. usage: consumer_test.sh <build-dir> <source-dir> [cuda-toolkit-root]
set -euo pipefail
build_dir=$1
source_dir=$2
cuda_root=${3:-}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build_dir" --prefix "$scratch/prefix" >/dev/null
# Only the package's headers are installed, not the private kernel sources.
test -f "$scratch/prefix/include/topk/selector.h"
test -f "$scratch/prefix/lib/cmake/topk/topkConfig.cmake"
extra=()
[ -n "$cuda_root" ] && extra+=("-DCUDAToolkit_ROOT=$cuda_root")
cmake -S "$source_dir/tests/consumer" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" "${extra[@]}" >/dev/null
cmake --build "$scratch/build" -j 2 >/dev/null
"$scratch/build/consumer"
