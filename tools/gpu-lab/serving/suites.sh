# shellcheck shell=bash
# The serving suites on the GPU (sourced by serving-h200.sh): the in-process
# suites on the CUDA backend, the CUDA IPC region test across processes and
# the torch client against a server of its own. Each writes one summary line:
# its exit status, seconds, and gtest's PASSED / FAILED lines.

# The in-process suites, in order: the SIGBUS suite first (the region that
# shrinks under a load loop is where a copy race shows first).
serving_suites=(region_sigbus_test coalescing_test region_pipeline_test region_select_test
  region_fault_test half_precision_test)

gtest_verdict() {  # LOG: gtest's summary lines (and each failing or skipped test's name)
  grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$1" 2>/dev/null | tr '\n' ' '
}

run_suite() {  # NAME LIMIT_S
  local t=$1 limit=$2 t0=$SECONDS
  [ -x "$bin/$t" ] || { note "$t: not packed"; return; }
  [ "$limit" -gt 5 ] || { note "$t skipped (budget)"; return; }
  TOPK_TEST_BACKEND=$backend REGION_SESSION_CHILD=$bin/region_session_child timeout "$limit" \
    "$bin/$t" >"$raw/$t.log" 2>&1
  local rc=$?
  note "$t rc=$rc $((SECONDS - t0)) s $(gtest_verdict "$raw/$t.log")"
}

# The checks across processes use the second GPU when there is one, so that
# they run beside the in-process suites without sharing a device.
cross_gpu() { [ "$gpus" -ge 2 ] && echo 1 || echo 0; }

# region_cuda_test: a second process exports CUDA IPC regions to a server
# this test starts. Writes raw/region_cuda_test.{log,rc}.
run_cuda_ipc() {  # LIMIT_S
  if [ ! -x "$bin/region_cuda_test" ]; then
    echo "region_cuda_test: not packed" >"$raw/region_cuda_test.rc"
    return
  fi
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$(cross_gpu) TOPK_SERVER_BINARY=$bin/topk-server timeout "$1" \
    "$bin/region_cuda_test" >"$raw/region_cuda_test.log" 2>&1
  echo "region_cuda_test rc=$? $((SECONDS - t0)) s" >"$raw/region_cuda_test.rc"
}

# The Python client's torch test against a server of its own (its own
# socket). Writes raw/torch_ipc_test.{log,rc}.
run_torch_client() {  # LIMIT_S
  local pysock=/tmp/topk-serving-py.sock pyserver pyroot=$root/python t0=$SECONDS
  export CUDA_VISIBLE_DEVICES
  CUDA_VISIBLE_DEVICES=$(cross_gpu)
  rm -f "$pysock"
  "$bin/topk-server" --backend="$backend" --enable_regions --listen="unix:$pysock" \
    --metrics_listen= --max_k=2048 >"$raw/py-server.log" 2>&1 &
  pyserver=$!
  for _ in $(seq 300); do [ -S "$pysock" ] && break; sleep 0.1; done
  # Stubs from this machine's own protoc when it has grpc_tools (its protobuf
  # runtime may be newer than the build machine's protoc).
  if python3 -c "import grpc_tools" 2>/dev/null; then
    rm -rf /tmp/pystubs && mkdir -p /tmp/pystubs && cp -r "$root/python/topk_client" /tmp/pystubs/ &&
      python3 -m grpc_tools.protoc --proto_path="$root/proto" \
        --python_out=/tmp/pystubs/topk_client/_proto \
        --grpc_python_out=/tmp/pystubs/topk_client/_proto "$root/proto/topk/v1/topk.proto" &&
      pyroot=/tmp/pystubs
  fi
  PYTHONPATH=$pyroot timeout "$1" python3 "$root/python-tests/torch_ipc_test.py" \
    --target "unix:$pysock" >"$raw/torch_ipc_test.log" 2>&1
  echo "torch_ipc_test rc=$? $((SECONDS - t0)) s" >"$raw/torch_ipc_test.rc"
  kill -TERM "$pyserver" 2>/dev/null
  wait "$pyserver"
}

# All of them: the checks across processes in the background, the in-process
# suites one after another (each within LIMIT_S and what the budget leaves).
run_all_suites() {  # LIMIT_S
  local each=$1 cuda_ipc torch_ipc
  (run_cuda_ipc "$each") &
  cuda_ipc=$!
  (run_torch_client "$each") &
  torch_ipc=$!
  for t in "${serving_suites[@]}"; do
    local limit=$each
    [ "$budget" -gt 0 ] && [ "$(($(left) - 3))" -lt "$limit" ] && limit=$(($(left) - 3))
    run_suite "$t" "$limit"
  done
  wait "$cuda_ipc" "$torch_ipc"
  note "$(cat "$raw/region_cuda_test.rc" 2>/dev/null) $(gtest_verdict "$raw/region_cuda_test.log")"
  note "$(cat "$raw/torch_ipc_test.rc" 2>/dev/null) $(grep -vE '^\[W|Warning' \
    "$raw/torch_ipc_test.log" 2>/dev/null | tail -3 | tr '\n' ' ')"
}

step_suites() {
  log "suites on the $backend backend; region_cuda_test and the torch client beside them"
  run_all_suites 120
}
