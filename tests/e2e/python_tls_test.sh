#!/usr/bin/env bash
# The Python client over mutual TLS (client/python/tests/mutual_tls_test.py)
# against a topk-server (CPU backend, regions on) that requires a client
# certificate on its loopback listener; certificates made for the run
# (tls_certificates.py, the openssl CLI). Skips (77) without python3 grpcio +
# numpy + protobuf, or without openssl.
# Usage: python_tls_test.sh TOPK_SERVER PYTHON_PACKAGE_ROOT LIBRARY SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/python_interpreter.sh"
source "$(dirname "$0")/server_port.sh"
server=$1 pyroot=$2 library=$3 source_dir=$4
py=$(python_with_grpc) || exit 77
if ! command -v openssl >/dev/null; then
  echo "SKIP: no openssl CLI (Debian's openssl) to make the test certificates"
  exit 77
fi
work=$(mktemp -d)
pid=""
cleanup() {
  [ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
tests=$source_dir/client/python/tests
"$py" "$tests/tls_certificates.py" "$work"
"$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --enable_regions \
  --max_rows=64 --max_width=65536 --max_k=512 --tls_cert="$work/server.pem" \
  --tls_key="$work/server.key" --tls_client_ca="$work/ca.pem" >"$work/server.log" 2>&1 &
pid=$!
port=$(listened_port "$work/server.log")
PYTHONPATH=$pyroot:$tests "$py" "$tests/mutual_tls_test.py" --target "127.0.0.1:$port" \
  --certs "$work" --library "$library"
