#!/usr/bin/env bash
# The Python ZeroCopyClient over shared memory against a real topk-server
# process on a unix socket: numpy rows and answers by reference, checked for
# exactness. Skips (77) without python3 grpcio + numpy + protobuf.
# Usage: python_regions_test.sh TOPK_SERVER PYTHON_PACKAGE_ROOT TEST_SCRIPT
set -euo pipefail
source "$(dirname "$0")/python_interpreter.sh"
server=$1 pyroot=$2 script=$3
py=$(python_with_grpc) || exit 77
work=$(mktemp -d)
"$server" --listen="unix:$work/topk.sock" --metrics_listen= --backend=cpu --enable_regions \
  --max_rows=64 --max_width=65536 --max_k=512 >"$work/server.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$work/topk.sock" ] && break; sleep 0.1; done
[ -S "$work/topk.sock" ] || { cat "$work/server.log"; exit 1; }
PYTHONPATH=$pyroot "$py" "$script" --target "unix:$work/topk.sock"
