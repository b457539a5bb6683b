#!/usr/bin/env bash
# Builds the topk-client wheel from a finished build: the package, its
# generated stubs, and beside it libtopk_c.so (the CUDA selector, when the
# build has it: CUDA archs of that build, 80;90 by default) and
# libtopk_client_c.so (the native RPC core), with the non-system libraries
# they need (rpath $ORIGIN). Offline: pip from a throwaway venv of Debian's
# python3 (python3-venv, python3-setuptools, python3-wheel; no PyPI).
# The wheel is py3-none-<platform>: any Python >= 3.9 on this OS/processor.
# Usage: scripts/build-wheel.sh [BUILD_DIR (build)] [OUT_DIR (dist)]
# Install: python3 -m venv --system-site-packages V && V/bin/pip install --no-index dist/*.whl
#   (--system-site-packages: torch, and grpcio/protobuf/numpy for the RPC paths, from the
#   system; a venv with torch alone: pip install --no-index --no-deps)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=$(realpath -m "${2:-dist}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
libs=()
for lib in "$build/kernels/src/cuda/libtopk_c.so" "$build/client/libtopk_client_c.so"; do
  if [ -f "$lib" ]; then libs+=("$lib"); else echo "build-wheel: no $lib (left out)"; fi
done
cp -r client/python "$work/pkg"
rm -rf "$work/pkg/build" "$work/pkg"/*.egg-info "$work/pkg/topk_client"/lib*.so*
if [ -d "$build/python/topk_client/_proto" ]; then  # the stubs the build generated
  cp -r "$build/python/topk_client/_proto" "$build/python/topk_client/_health_proto" \
    "$work/pkg/topk_client/"
fi
if [ ${#libs[@]} -gt 0 ]; then
  bash deploy/make-relocatable.sh "$work/reloc" --lib "${libs[@]}" >/dev/null
  cp "$work/reloc/lib/"* "$work/pkg/topk_client/"
fi
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
mkdir -p "$out"
# The copy of the tree needs proto/ beside it only when no stubs were generated.
mkdir -p "$work/proto-root/client" && mv "$work/pkg" "$work/proto-root/client/python"
cp -r proto "$work/proto-root/proto"
"$work/venv/bin/pip" wheel -q --no-build-isolation --no-deps --no-index -w "$out" \
  "$work/proto-root/client/python"
ls "$out"/topk_client-*.whl
