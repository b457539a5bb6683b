#!/usr/bin/env bash
# The wheel as a user gets it (issue 31): scripts/build-wheel.sh from the
# finished build (no second compile), installed offline (pip --no-index)
# into a fresh venv of Debian's python3, then from there, outside the
# source tree: python -m topk_client.check (the libraries it carries load;
# the select runs where there is a GPU), the drop-ins' row arithmetic, and
# the RPC names importing. Skips (77) without python3-venv.
# Usage: wheel_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1") source_dir=$(realpath "$2")
if ! /usr/bin/python3 -c "import venv, ensurepip, setuptools, wheel" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 lacks venv/setuptools/wheel (python3-venv python3-setuptools" \
    "python3-wheel: scripts/setup-deps.sh)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$source_dir/scripts/build-wheel.sh" "$build" "$work/dist"
wheel=$(ls "$work"/dist/topk_client-*-py3-none-*.whl)
carried=$(python3 -m zipfile -l "$wheel")
for lib in libtopk_c.so libtopk_client_c.so; do
  built=$(find "$build" -name "$lib" -print -quit)
  if [ -n "$built" ] && ! grep -q "topk_client/$lib" <<<"$carried"; then
    echo "FAIL: the build has $built, the wheel does not carry it"; exit 1
  fi
done
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install -q --no-index "$wheel"
cd "$work"  # nothing of the source tree on the path
"$work/venv/bin/python" -m topk_client.check | tee "$work/check.txt"
if grep -q "topk_client/libtopk_c.so" <<<"$carried"; then
  grep -q "libtopk_c.so: $work/venv/.*/topk_client/libtopk_c.so (C ABI version" "$work/check.txt" \
    || { echo "FAIL: check did not load the wheel's libtopk_c.so"; exit 1; }
fi
"$work/venv/bin/python" "$source_dir/client/python/tests/compat_rows_test.py"
"$work/venv/bin/python" -c "import topk_client; topk_client.TopKClient; print('RPC names import')"
echo "wheel $(basename "$wheel"): built from $build, installed offline, checked"
