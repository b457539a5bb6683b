#!/usr/bin/env bash
# Builds the CUDA-enabled server, its tools and the server test suites here
# and packs them into .carry/server/ (bin/, lib/, rpath $ORIGIN/../lib) for
# server-e2e.sh on the GPU machine. Its own folder: deploy/package.sh's dist/
# is left alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${TOPK_BUILD_DIR:-build-gpu-lab-server}
dest=.carry/server
cmake -S . -B "$build" -DTOPK_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DTOPK_BUILD_TESTS=ON \
  -DTOPK_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES="${TOPK_CUDA_ARCH:-90}" >/dev/null
tests=(e2e_test bad_input_test concurrency_test shutdown_test health_reflection_test rss_test
       engine_tls_test raw_select_test row_source_test raw_select_fuzz_test half_precision_test)
cmake --build "$build" -j "${TOPK_JOBS:-2}" --target topk-server topk-cli topk-loadgen \
  "${tests[@]}"
rm -rf "$dest"
bins=()
for t in topk-server topk-cli topk-loadgen "${tests[@]}"; do
  # Found by name: the layout of server/, client/ and tests/ may move.
  path=$(find "$build" -type f -name "$t" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
  if [ -n "$path" ]; then bins+=("$path"); else echo "note: $t was not built" >&2; fi
done
bash deploy/make-relocatable.sh "$dest" "${bins[@]}"
strip "$dest"/bin/* 2>/dev/null || true
du -sh "$dest"
