#!/usr/bin/env bash
# The main job: build, start topk-server (CUDA backend when a GPU is usable,
# else CPU) on a free loopback port, wait for health SERVING, drive it with
# topk-loadgen on causal indexer-like rows (exactness spot-checked with the
# verifier on every 4th answer), print the latency/throughput table and the
# server's counters, stop the server (SIGTERM, graceful drain).
# Environment: TOPK_BUILD_DIR (build), TOPK_JOBS (nproc), TOPK_MAIN_SECONDS
# (per step, 4), TOPK_SKIP_BUILD=1 to reuse an existing build. Extra args go to
# topk-loadgen. Only the three binaries it runs are built (scripts/test.sh
# builds the rest into the same directory).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TOPK_BUILD_DIR:-build}
if [ "${TOPK_SKIP_BUILD:-0}" != 1 ]; then
  bash scripts/setup-deps.sh
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" -j "${TOPK_JOBS:-$(nproc)}" --target topk-server topk-cli topk-loadgen
fi
server=$build_dir/server/topk-server
loadgen=$build_dir/client/tools/topk-loadgen
cli=$build_dir/client/tools/topk-cli
seconds=${TOPK_MAIN_SECONDS:-4}

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  # GPU: a bigger batch, sent as a stream (no single message bounds it).
  shape=(--rows=128 --width=262144 --k=2048 --stream --concurrency=1,2,4,8)
else
  shape=(--rows=64 --width=131072 --k=2048 --concurrency=1,2,4)
fi

log=$(mktemp -t topk-server.XXXXXX.log)
"$server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --backend=auto \
  --max_rows=1024 --max_width=1048576 --max_k=2048 >"$log" 2>&1 &
server_pid=$!
stop_server() {
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
}
trap 'stop_server; rm -f "$log"' EXIT

port=""
for _ in $(seq 600); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" | cut -d: -f2 || true)
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$log"; echo "main: server exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; echo "main: server did not start" >&2; exit 1; }
target=127.0.0.1:$port
for _ in $(seq 300); do
  [ "$("$cli" health --target="$target" 2>/dev/null)" = SERVING ] && break
  sleep 0.1
done
echo "== topk-server on $target: $("$cli" health --target="$target")"
grep -E "NO GPU|backend|listening|metrics" "$log" | sed 's/^/   /'

echo "== load: causal indexer rows, every 4th answer verified exact"
rc=0
"$loadgen" --target="$target" --distribution=indexer --lengths=causal "${shape[@]}" \
  --duration_s="$seconds" --warmup_s=1 --verify_every=4 --progress=false "$@" || rc=$?

echo "== one fully verified call (every row checked) through topk-cli"
"$cli" select --target="$target" --distribution=indexer --lengths=causal --rows=64 \
  --width=131072 --k=2048 --sorted --verify --print_rows=0 || rc=$?

echo "== server counters (Prometheus text)"
"$cli" stats --target="$target" --prometheus |
  grep -E '^topk_(requests_total|rows_total|errors_total\{code="(INVALID_ARGUMENT|RESOURCE_EXHAUSTED|UNAVAILABLE|INTERNAL)"\}|latency_seconds_count|latency_seconds_sum)' |
  sed 's/^/   /'
stop_server
tail -n 2 "$log" | sed 's/^/   /'
[ "$rc" = 0 ] && echo "main: OK (every checked answer exact)" || echo "main: FAILED (rc=$rc)"
exit "$rc"
