#!/usr/bin/env bash
# The channel checks on a GPU machine, from the serving pack (ROOT: bin/, lib/,
# python/, python-tests/, frontend/), in one call:
#   test      channel_torch_test.py against a CUDA server, without MPS and
#             under MPS (exactness, in place, values, a captured graph replayed,
#             the valid/invalid mix, host cost per call)
#   memcheck  the server under compute-sanitizer memcheck while the test's mix
#             runs (FUZZ calls), "ERROR SUMMARY: 0 errors" expected
#   kill      a client killed (SIGKILL) mid-stream: the server's channel is gone
#             within 1 s (GetStats channels_open), the server keeps serving
#   bench     bench/frontend/run.sh (every provider, with and without MPS)
#   paths     the in-process path (inprocess_gpu_test.py on ROOT/lib/libtopk_c.so)
#             and prefill-size batches by CUDA IPC on a default server
#             (limits_ipc_gpu_test.py: 2048 x 64K and 8192 x 128K FP32)
#   cxx       the C++ client's stream path: region_cuda_test's channel cases
#             (eager and graph-captured calls on a CUDA stream, a refused call)
#             and topk-loadgen --transport=channel and channel-shm (answers
#             verified), without and under MPS
#   racecheck the server under compute-sanitizer racecheck while the test's
#             mix runs (FUZZ_RACE calls: the epilogue and the selector kernels)
#   fault     probes/mps_client_fault.sh: a client's illegal-address fault
#             beside a serving channel, without and under MPS
# Usage: channels-h200.sh ROOT OUT [steps]   (default test,memcheck,kill)
set -uo pipefail
root=$(cd "$1" && pwd) out=$2 steps=${3:-test,memcheck,kill}
mkdir -p "$out"
bin=$root/bin sock=/tmp/topk-ch.sock
export PYTHONPATH=$root/python PYTHONUNBUFFERED=1
summary=$out/channels_summary.txt
note() { echo "$*" | tee -a "$summary"; }
server=
start_server() {  # [wrapper...]
  rm -f "$sock"
  "$@" "$bin/topk-server" --backend=cuda --cuda_devices=0 --enable_regions \
    --listen="unix:$sock" --metrics_listen= >"$out/server_$tag.log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do
    "$bin/topk-cli" --target="unix:$sock" health 2>/dev/null | grep -q SERVING && return 0
    sleep 0.1
  done
  note "server ($tag) did not start"; tail -5 "$out/server_$tag.log" | tee -a "$summary"; return 1
}
# The server itself gets the signal (under compute-sanitizer, the tool's child:
# the tool then prints its summary as the server exits).
stop_server() {
  pkill -TERM -P "$server" 2>/dev/null || kill -TERM "$server" 2>/dev/null
  wait "$server" 2>/dev/null; server=
}
mps_on() {
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/topk-mps CUDA_MPS_LOG_DIRECTORY=/tmp/topk-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && sleep 1
}
mps_off() { echo quit | nvidia-cuda-mps-control; sleep 1; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
run_test() {  # extra args
  local t0=$SECONDS
  timeout "${TEST_TIMEOUT:-240}" python3 "$root/python-tests/channel_torch_test.py" --target "unix:$sock" "$@" \
    >"$out/channel_test_$tag.log" 2>&1
  note "channel_torch_test ($tag) rc=$? $((SECONDS - t0)) s: $(tail -3 "$out/channel_test_$tag.log" | tr '\n' ' ')"
}
nvidia-smi -L | tee -a "$summary"
for step in ${steps//,/ }; do
  case $step in
    test)
      tag=nomps; start_server && { run_test; grep -i "mps" "$out/server_$tag.log" | head -2 >>"$summary"; stop_server; }
      mps_on; tag=mps; start_server && { run_test; grep -i "mps" "$out/server_$tag.log" | head -2 >>"$summary"; stop_server; }
      mps_off ;;
    memcheck)
      tag=memcheck
      start_server compute-sanitizer --tool memcheck --print-limit 20 && {
        run_test --fuzz_calls "${FUZZ:-1500}" --graph_replays 10; stop_server; }
      note "memcheck: $(grep -E 'ERROR SUMMARY' "$out/server_$tag.log" | tail -1)" ;;
    kill)
      tag=kill; start_server && {
        timeout 90 python3 "$root/python-tests/channel_kill_test.py" --target "unix:$sock" \
          >"$out/kill_$tag.log" 2>&1
        note "kill: $(tail -4 "$out/kill_$tag.log" | tr '\n' ' ')"; stop_server; } ;;
    paths)
      tag=paths
      TOPK_LIBRARY=$root/lib/libtopk_c.so timeout 200 python3 \
        "$root/python-tests/inprocess_gpu_test.py" >"$out/inprocess_gpu_test.log" 2>&1
      note "inprocess_gpu_test rc=$? $(tail -2 "$out/inprocess_gpu_test.log" | tr '\n' ' ')"
      start_server && {
        timeout 200 python3 "$root/python-tests/limits_ipc_gpu_test.py" --target "unix:$sock" \
          >"$out/limits_ipc_gpu_test.log" 2>&1
        note "limits_ipc_gpu_test rc=$? $(tail -3 "$out/limits_ipc_gpu_test.log" | tr '\n' ' ')"
        stop_server; } ;;
    cxx)
      for tag in cxx cxx-mps; do
        [ $tag = cxx-mps ] && mps_on
        TOPK_SERVER_BINARY=$bin/topk-server timeout 200 "$bin/region_cuda_test" \
          --gtest_filter='*Channel*' >"$out/region_cuda_test_$tag.log" 2>&1
        note "region_cuda_test channel cases ($tag) rc=$? $(grep -E 'EnqueueChannelCall|PASSED|FAILED' "$out/region_cuda_test_$tag.log" | tr '\n' ' ')"
        start_server && {
          for t in channel channel-shm; do
            timeout 90 "$bin/topk-loadgen" --target="unix:$sock" --transport=$t --rows=8 \
              --width=131072 --k=2048 --concurrency=1,4 --duration_s=3 --warmup_s=0.5 \
              --verify_every=1 --progress=false --csv="$out/loadgen_${t}_$tag.csv" \
              >"$out/loadgen_${t}_$tag.log" 2>&1
            note "loadgen --transport=$t ($tag) rc=$? $(tail -4 "$out/loadgen_${t}_$tag.log" | tr '\n' ' ')"
          done
          stop_server; }
        [ $tag = cxx-mps ] && mps_off
      done ;;
    racecheck)
      tag=racecheck
      start_server compute-sanitizer --tool racecheck --print-limit 20 && {
        run_test --fuzz_calls "${FUZZ_RACE:-200}" --graph_replays 5; stop_server; }
      note "racecheck: $(grep -E 'RACECHECK SUMMARY' "$out/server_$tag.log" | tail -1)" ;;
    fault)
      bash "$root/probes/mps_client_fault.sh" "$root" "$out" >"$out/fault.log" 2>&1
      note "fault rc=$? $(cat "$out/mps_fault_summary.txt" 2>/dev/null)" ;;
    bench)
      bash "$root/frontend/run.sh" "$root" "$out" >"$out/frontend_run.log" 2>&1
      note "bench rc=$? $(tail -25 "$out/frontend_run.log")" ;;
  esac
done
cp "$summary" "$out/" 2>/dev/null
