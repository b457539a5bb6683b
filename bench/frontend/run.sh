#!/usr/bin/env bash
# The frontend benchmark (frontend_bench.py, README.md) on a GPU machine, once
# without and once under MPS, each against a topk-server of its own:
#   bash bench/frontend/run.sh ROOT OUT
# ROOT: a packed tree (bin/topk-server, bin/topk-cli, python/topk_client,
# proto/, optionally lib/libtopk_c.so), e.g. tools/gpu-lab/pack-serving.sh's.
# OUT: where the logs and frontend.csv (both runs merged) go.
# Env: STEPS (timed steps per provider and mode, default 200), RUN_LIMIT_S
# (each run's bound, default 160), GRAPH=0 to skip the CUDA graph mode,
# BENCH_ARGS (more frontend_bench.py flags). About 6 minutes in all.
set -uo pipefail
root=$(realpath "${1:?usage: run.sh ROOT OUT}")
out=$(realpath -m "${2:?usage: run.sh ROOT OUT}")
here=$(dirname "$(realpath "$0")")
mkdir -p "$out"
sock=/tmp/topk-bench.sock
steps=${STEPS:-200}
limit=${RUN_LIMIT_S:-160}
graph=--graph; [ "${GRAPH:-1}" = 0 ] && graph=
server_pid=""

# Stubs from this machine's protoc when it has grpc_tools (its protobuf
# runtime may be newer than the one the packed stubs were made for).
pyroot=$root/python
if python3 -c "import grpc_tools" 2>/dev/null; then
  rm -rf /tmp/frontend-stubs && mkdir -p /tmp/frontend-stubs &&
    cp -r "$root/python/topk_client" /tmp/frontend-stubs/ &&
    python3 -m grpc_tools.protoc --proto_path="$root/proto" \
      --python_out=/tmp/frontend-stubs/topk_client/_proto \
      --grpc_python_out=/tmp/frontend-stubs/topk_client/_proto \
      "$root/proto/topk/v1/topk.proto" && pyroot=/tmp/frontend-stubs
fi
export PYTHONPATH=$pyroot:$root/python${PYTHONPATH:+:$PYTHONPATH}
libtopk=""
[ -e "$root/lib/libtopk_c.so" ] && libtopk=$root/lib/libtopk_c.so

start_server() {  # LOG
  rm -f "$sock"
  # Limits for the prefill chunk: 2048 rows, 512 MiB of FP32 rows per call.
  "$root/bin/topk-server" --backend=cuda --enable_regions --listen="unix:$sock" \
    --metrics_listen= --max_k=2048 --max_rows=4096 --max_width=1048576 \
    --max_batch_bytes=$((1 << 30)) >"$1" 2>&1 &
  server_pid=$!
  for _ in $(seq 300); do
    if [ -S "$sock" ] && "$root/bin/topk-cli" --target="unix:$sock" health 2>/dev/null |
        grep -q '^SERVING'; then
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "topk-server did not start serving:"; tail -20 "$1"
  return 1
}

stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
}

bench() {  # NAME MPS_LABEL
  local name=$1 rc
  start_server "$out/server-$name.log" || { stop_server; return 1; }
  # shellcheck disable=SC2086
  timeout "$limit" python3 "$here/frontend_bench.py" --target="unix:$sock" \
    ${libtopk:+--libtopk="$libtopk"} --steps="$steps" $graph --mps="$2" \
    --csv="$out/frontend-$name.csv" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench-$name.log"
  rc=${PIPESTATUS[0]}
  stop_server
  echo "== $name: rc=$rc"
  return "$rc"
}

mps_stop() {
  echo quit | nvidia-cuda-mps-control 2>/dev/null
}

trap 'stop_server; [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && mps_stop' EXIT
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv | tee "$out/gpu.txt"

bench plain off
plain_rc=$?

# The same under MPS: the server and the benchmark become clients of one
# MPS server (the variables must be set for both before they start).
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-bench CUDA_MPS_LOG_DIRECTORY=/tmp/mps-bench-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mps_rc=0
if nvidia-cuda-mps-control -d; then
  bench mps on
  mps_rc=$?
  mps_stop
else
  echo "nvidia-cuda-mps-control -d failed: no MPS run"
  mps_rc=1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

# One CSV: the first file's header, then every file's rows.
first=1
for f in "$out"/frontend-plain.csv "$out"/frontend-mps.csv; do
  [ -s "$f" ] || continue
  if [ $first = 1 ]; then cat "$f"; first=0; else tail -n +2 "$f"; fi
done >"$out/frontend.csv"
echo "== $out/frontend.csv ($(($(wc -l <"$out/frontend.csv") - 1)) rows); plain rc=$plain_rc, mps rc=$mps_rc"
[ "$plain_rc" = 0 ] && [ "$mps_rc" = 0 ]
