#!/usr/bin/env bash
# Builds topk-server and its client tools and packs the relocatable tarball
# dist/topk-select-VERSION-ARCH[-cuda].tar.gz: bin/ (rpath $ORIGIN/../lib),
# lib/ (every non-system shared library they need), python/ (the Python
# client), docs/service.md. Runs on hosts without the build dependencies.
# Environment: TOPK_BUILD_DIR (build-package), TOPK_CUDA (AUTO), TOPK_JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TOPK_BUILD_DIR:-build-package}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTOPK_CUDA="${TOPK_CUDA:-AUTO}" \
  -DTOPK_BUILD_TESTS=OFF -DTOPK_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "${TOPK_JOBS:-2}" --target topk-server topk-cli topk-loadgen
targets=(topk-server topk-cli topk-loadgen)
cmake --build "$build" --target topk_python_client 2>/dev/null || true
version=$(sed -n 's/^project(topk_select VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
suffix=""
grep -q "TOPK_HAVE_CUDA=1" "$build/server/CMakeFiles/topk_server_lib.dir/flags.make" && suffix=-cuda
name=topk-select-$version-$(uname -m)$suffix
stage=dist/$name
rm -rf "$stage"
bash deploy/make-relocatable.sh "$stage" "$build/server/topk-server" \
  "$build/client/tools/topk-cli" "$build/client/tools/topk-loadgen"
strip "$stage"/bin/* 2>/dev/null || true
if [ -d "$build/python/topk_client" ]; then
  mkdir -p "$stage/python" && cp -r "$build/python/topk_client" "$stage/python/"
fi
mkdir -p "$stage/docs" && cp docs/service.md "$stage/docs/" 2>/dev/null || true
tar -C dist -czf "dist/$name.tar.gz" "$name"
echo "dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1)): ${targets[*]}"
