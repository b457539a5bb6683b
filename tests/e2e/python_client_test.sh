#!/usr/bin/env bash
# The Python client against real topk-server processes, as a user gets it:
# the package pip-installed from a copy of client/python (its stubs made by
# client/python/generate.sh), then the example, the README's snippet and
# client/python/tests/client_test.py (padded rows, asyncio, round_robin over
# two servers, message limits, health). Skips (77) without python3 grpcio +
# numpy. Also the README snippet with the package the CMake build assembles
# (PYTHON_PACKAGE_ROOT). Usage: python_client_test.sh TOPK_SERVER PYTHON_PACKAGE_ROOT EXAMPLE
set -euo pipefail
source "$(dirname "$0")/python_interpreter.sh"
source "$(dirname "$0")/server_port.sh"
server=$1 build_package=$2 example=$3
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
py=$(python_with_grpc) || exit 77
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
ports=()
for name in a b; do
  "$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --max_rows=64 \
    --max_width=65536 --max_k=512 >"$work/$name.log" 2>&1 &
  pids+=($!)
  port=$(listened_port "$work/$name.log")
  ports+=("$port")
done
# The package as `pip install client/python` makes it, from a copy so the
# source tree stays clean; without pip, the generated copy itself.
mkdir -p "$work/src/client"
cp -r "$source_dir/proto" "$work/src/proto"
cp -r "$source_dir/client/python" "$work/src/client/python"
rm -rf "$work/src/client/python/topk_client/_proto" \
  "$work/src/client/python/topk_client/_health_proto"
"$work/src/client/python/generate.sh" >/dev/null
site=$work/src/client/python
if "$py" -m pip --version >/dev/null 2>&1 &&
  "$py" -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$work/site" \
    "$work/src/client/python" >"$work/pip.log" 2>&1; then
  site=$work/site
  [ -e "$site/topk_client/_health_proto/grpc/health/v1/health_pb2.py" ]
else
  echo "pip install did not run (see below); testing the generated sources"
  cat "$work/pip.log" 2>/dev/null || true
fi
cd "$work"
PYTHONPATH=$site "$py" "$example" --target "127.0.0.1:${ports[0]}" --rows 6 --width 20000 --k 128
# The README's Serving snippet, word for word but for the port and the path.
# (`python3` or `/usr/bin/python3`: the interpreter with Debian's grpcio).
snippet=$(sed -n '/^PYTHONPATH=build\/python \(\/usr\/bin\/\)\{0,1\}python3 -c "$/,/^print(.*)"$/p' \
  "$source_dir/README.md" |
  sed '1d; $s/"$//')
[ -n "$snippet" ] || { echo "README snippet not found"; exit 1; }
PYTHONPATH=$site "$py" -c "${snippet//50051/${ports[0]}}" | grep -Eq '^\[\[ *[0-9]'
# The same with the package the CMake build assembles (the README's path).
PYTHONPATH=$build_package "$py" -c "${snippet//50051/${ports[0]}}" | grep -Eq '^\[\[ *[0-9]'
if [ -d "$build_package/topk_client/_health_proto" ]; then
  PYTHONPATH=$build_package "$py" -c "
from topk_client import TopKClient
assert TopKClient('127.0.0.1:${ports[0]}').is_serving()"
fi
PYTHONPATH=$site "$py" "$source_dir/client/python/tests/client_test.py" "${ports[0]}" "${ports[1]}"
