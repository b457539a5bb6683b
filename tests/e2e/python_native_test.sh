#!/usr/bin/env bash
# The Python client's native RPC core (libtopk_client_c.so) against real
# topk-server processes (CPU backend, regions on): the core's own argument
# checks and messages, the server's refusals and exact answers on both paths,
# the fallback to grpcio (native_core_test.py); then regions_shm_test.py and
# client_test.py with the core required (TOPK_CLIENT_LIBRARY). Skips (77)
# without python3 grpcio + numpy + protobuf.
# Usage: python_native_test.sh TOPK_SERVER PYTHON_PACKAGE_ROOT LIBRARY SOURCE_DIR
set -euo pipefail
source "$(dirname "$0")/python_interpreter.sh"
source "$(dirname "$0")/server_port.sh"
server=$1 pyroot=$2 library=$3 source_dir=$4
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
  "$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --enable_regions \
    --max_rows=64 --max_width=65536 --max_k=512 >"$work/$name.log" 2>&1 &
  pids+=($!)
  ports+=("$(listened_port "$work/$name.log")")
done
tests=$source_dir/client/python/tests
export PYTHONPATH=$pyroot
"$py" "$tests/native_core_test.py" --target "127.0.0.1:${ports[0]}" --library "$library"
# The suites the grpcio path passes, with the core required (a library that
# does not load fails them instead of falling back).
TOPK_CLIENT_LIBRARY=$library "$py" "$tests/regions_shm_test.py" \
  --target "127.0.0.1:${ports[0]}" | tee "$work/regions.out"
[ "$(grep -c 'native core): exact' "$work/regions.out")" = 2 ]
TOPK_CLIENT_LIBRARY=$library "$py" "$tests/client_test.py" "${ports[0]}" "${ports[1]}"
