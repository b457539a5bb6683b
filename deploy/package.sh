#!/usr/bin/env bash
# Builds the product and packs the relocatable tarball
# dist/topk-select-VERSION-ARCH[-cuda].tar.gz. Its tree is the CMake install
# tree plus what hosts without the build dependencies need:
#   bin/     topk-server, topk-cli, topk-loadgen (rpath $ORIGIN/../lib)
#   include/, lib/, lib/cmake/topk/   headers, libraries and the CMake package
#            (find_package(topk) with CMAKE_PREFIX_PATH=<unpacked dir>)
#   lib/     also every non-system shared library the binaries load
#   python/  the Python client; share/doc/topk-select/  docs and licenses
# Environment: TOPK_BUILD_DIR (build-package), TOPK_CUDA (AUTO), TOPK_JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TOPK_BUILD_DIR:-build-package}
configure_log=$(cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTOPK_CUDA="${TOPK_CUDA:-AUTO}" \
  -DTOPK_BUILD_TESTS=OFF -DTOPK_BUILD_BENCH=OFF)
# The default target builds everything the install rules name.
cmake --build "$build" -j "${TOPK_JOBS:-2}"
cmake --build "$build" --target topk_python_client 2>/dev/null || true
version=$(sed -n 's/^project(topk_select VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
suffix=""
grep -q "topk: CUDA backend ON" <<<"$configure_log" && suffix=-cuda
name=topk-select-$version-$(uname -m)$suffix
stage=dist/$name
rm -rf "$stage"
cmake --install "$build" --prefix "$stage" >/dev/null
# Bring in the shared libraries the installed binaries and libraries load.
shopt -s nullglob
bash deploy/make-relocatable.sh "$stage" "$stage"/bin/* --lib "$stage"/lib/*.so
strip "$stage"/bin/* 2>/dev/null || true
if [ -d "$build/python/topk_client" ]; then
  mkdir -p "$stage/python" && cp -r "$build/python/topk_client" "$stage/python/"
fi
doc=$stage/share/doc/topk-select
mkdir -p "$doc"
cp LICENSE THIRD_PARTY_NOTICES.md README.md "$doc/"
cp docs/*.md "$doc/"
tar -C dist -czf "dist/$name.tar.gz" "$name"
echo "dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1)):" $(ls "$stage/bin")
