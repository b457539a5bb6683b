#!/usr/bin/env bash
# The Python client against a real topk-server process: unary and streamed
# selects checked against numpy. Skips (77) without python3 grpcio + numpy.
# Usage: python_client_test.sh TOPK_SERVER PYTHON_PACKAGE_ROOT EXAMPLE
set -euo pipefail
server=$1 pyroot=$2 example=$3
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if ! "$py" -c "import grpc, numpy, google.protobuf" 2>/dev/null; then
  echo "SKIP: python3 lacks grpcio/numpy/protobuf (python3-grpcio python3-numpy python3-protobuf)"
  exit 77
fi
log=$(mktemp)
"$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --max_rows=64 \
  --max_width=65536 --max_k=512 >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 100); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | cut -d: -f2 || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; exit 1; }
PYTHONPATH=$pyroot "$py" "$example" --target "127.0.0.1:$port" --rows 6 --width 20000 --k 128
