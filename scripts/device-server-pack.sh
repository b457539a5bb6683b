#!/usr/bin/env bash
# Builds the CUDA-enabled server, its tools and the server test suites here
# and packs them into dist/ (bin/ + lib/, rpath $ORIGIN/../lib) for
# scripts/device-server-e2e.sh on the GPU machine (carry: ["dist"]).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TOPK_BUILD_DIR:-build-server-cuda}
cmake -S . -B "$build" -DTOPK_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DTOPK_BUILD_TESTS=ON \
  -DTOPK_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=${TOPK_CUDA_ARCH:-90} >/dev/null
tests=(e2e_test bad_input_test concurrency_test shutdown_test health_reflection_test rss_test
       engine_tls_test raw_select_test)
cmake --build "$build" -j "${TOPK_JOBS:-2}" --target topk-server topk-cli topk-loadgen \
  server_bench topk_python_client "${tests[@]}"
rm -rf dist
bins=("$build/server/topk-server" "$build/client/tools/topk-cli"
      "$build/client/tools/topk-loadgen" "$build/bench/server/server_bench")
for t in "${tests[@]}"; do bins+=("$build/tests/server/$t"); done
bash deploy/make-relocatable.sh dist "${bins[@]}"
strip dist/bin/* 2>/dev/null || true
if [ -d "$build/python/topk_client" ]; then
  mkdir -p dist/python && cp -r "$build/python/topk_client" dist/python/
fi
du -sh dist
