#!/usr/bin/env bash
# The Python package as a user installs it, with the interpreter the README
# names: Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf,
# python3-numpy from scripts/setup-deps.sh) in a venv made with
# --system-site-packages, `pip install --no-build-isolation client/python`
# (no PyPI needed: the stubs come from protoc + grpc_python_plugin), then a
# Select against a CPU server. The lines run are the README's own, word for
# word but for the port (from its line `/usr/bin/python3 -m venv` through the
# first `print(...)"` after it), in a copy of the tree with HOME in a
# scratch folder; while the README does not have them yet, the copy below
# (issue 20's proposal) runs instead, and says so.
# Skips (77) without Debian's python3 + grpcio/protobuf/numpy + venv.
# Usage: python_package_test.sh TOPK_SERVER SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/server_port.sh"
server=$1 source_dir=$2
if ! /usr/bin/python3 -c "import grpc, numpy, google.protobuf, venv, ensurepip" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 lacks grpcio/numpy/protobuf/venv (python3-grpcio python3-numpy" \
    "python3-protobuf python3-venv: scripts/setup-deps.sh)"
  exit 77
fi
read -r -d '' proposed <<'EOF' || true
/usr/bin/python3 -m venv --system-site-packages ~/.venvs/topk
~/.venvs/topk/bin/pip install --no-build-isolation client/python
~/.venvs/topk/bin/python -c "
from topk_client import TopKClient; import numpy as np
print(TopKClient('127.0.0.1:50051').select([np.random.rand(5000).astype('f4')], k=8).indices)"
EOF
lines=$(sed -n '/^\/usr\/bin\/python3 -m venv /,/^print(.*)"/p' "$source_dir/README.md")
if [ -z "$lines" ]; then
  echo "NOTE: README.md has no '/usr/bin/python3 -m venv' lines yet: running the proposed ones"
  lines=$proposed
fi

work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
"$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --max_rows=64 \
  --max_width=65536 --max_k=512 >"$work/server.log" 2>&1 &
pid=$!
port=$(listened_port "$work/server.log")
# What the lines need of the tree (client/python, and the protos it builds
# from); the user's checkout stays clean, and the venv lands in HOME.
mkdir -p "$work/tree/client" "$work/home"
cp -r "$source_dir/proto" "$work/tree/proto"
cp -r "$source_dir/client/python" "$work/tree/client/python"
rm -rf "$work/tree/client/python/topk_client/_proto" \
  "$work/tree/client/python/topk_client/_health_proto" "$work/tree/client/python/build"
echo "--- running:"
echo "$lines"
cd "$work/tree"
# A clean environment but for PATH: no PYTHONPATH or pyenv choice leaks in.
env -i PATH="$PATH" HOME="$work/home" bash -euo pipefail -c "${lines//50051/$port}" \
  >"$work/out.txt" 2>"$work/err.txt" || {
  echo "--- the lines failed:"; cat "$work/err.txt" "$work/out.txt"; exit 1; }
cat "$work/out.txt"
grep -Eq '^\[\[ *[0-9]' "$work/out.txt" || { echo "no indices printed"; exit 1; }
# The package is the one installed in the venv, not a source folder.
env -i PATH="$PATH" HOME="$work/home" "$work/home/.venvs/topk/bin/python" -c "
import topk_client, sys
assert '/.venvs/topk/' in topk_client.__file__, topk_client.__file__
print('installed at', topk_client.__file__)"
echo "README Python lines: ran as written against a CPU server"
