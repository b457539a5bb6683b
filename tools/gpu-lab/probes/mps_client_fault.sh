#!/usr/bin/env bash
# What a client's fatal GPU fault does to a co-located topk-server and its
# other clients, with and without MPS (docs/channels.md, "Faults"). For each
# mode: a CUDA server, a channel client driving it (topk-loadgen
# --transport=channel, answers verified) for the whole run, a second process
# (client_fault) that faults with an illegal address 2 s in; then the
# loadgen's errors, the server's health and log, and whether a fresh client
# is served afterwards.
# usage: mps_client_fault.sh ROOT OUT   (ROOT: the serving pack, bin/ with
#        topk-server, topk-cli, topk-loadgen and client_fault)
set -uo pipefail
root=$(cd "$1" && pwd) out=$2
bin=$root/bin sock=/tmp/topk-fault.sock
mkdir -p "$out"
summary=$out/mps_fault_summary.txt
note() { echo "$*" | tee -a "$summary"; }
loadgen() {  # label duration
  timeout 60 "$bin/topk-loadgen" --target="unix:$sock" --transport=channel --rows=8 \
    --width=131072 --k=2048 --concurrency=1 --duration_s="$2" --warmup_s=0.5 --verify_every=1 \
    --progress=false --csv="$out/fault_$1.csv" >"$out/fault_$1.log" 2>&1
  echo "rc=$?"
}
for mode in nomps mps; do
  if [ $mode = mps ]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/topk-fault-mps CUDA_MPS_LOG_DIRECTORY=/tmp/topk-fault-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d && sleep 1
  fi
  rm -f "$sock"
  "$bin/topk-server" --backend=cuda --cuda_devices=0 --enable_regions --listen="unix:$sock" \
    --metrics_listen= >"$out/fault_server_$mode.log" 2>&1 &
  server=$!
  for _ in $(seq 1 300); do
    "$bin/topk-cli" --target="unix:$sock" health 2>/dev/null | grep -q SERVING && break
    sleep 0.1
  done
  loadgen "${mode}_during" 6 >"$out/fault_${mode}_during.rc" &
  lg=$!
  "$bin/client_fault" 2000 >"$out/fault_client_$mode.log" 2>&1
  note "$mode: faulting client: $(tr '\n' ' ' <"$out/fault_client_$mode.log")"
  # The server's view after the fault: its health, and (with
  # --exit_on_device_lost, the default) whether it shut itself down.
  t_fault=$(date +%s%N)
  seen=
  for _ in $(seq 1 40); do
    if ! kill -0 $server 2>/dev/null; then seen="server exited after $(( ($(date +%s%N) - t_fault) / 1000000 )) ms"; break; fi
    if "$bin/topk-cli" --target="unix:$sock" health 2>&1 | grep -q NOT_SERVING; then
      [ -z "$seen" ] && seen="NOT_SERVING after $(( ($(date +%s%N) - t_fault) / 1000000 )) ms"
    fi
    sleep 0.1
  done
  note "$mode: server after the fault: ${seen:-still SERVING after 4 s}"
  wait $lg
  note "$mode: channel client during the fault: $(cat "$out/fault_${mode}_during.rc"); $(grep -E -i 'error|refused|unavailable|p50' "$out/fault_${mode}_during.log" | head -4 | tr '\n' ' ')"
  note "$mode: health after: $("$bin/topk-cli" --target="unix:$sock" health 2>&1 | tr '\n' ' ')"
  note "$mode: a fresh client after: $(loadgen "${mode}_after" 2) $(grep -E -i 'error|p50' "$out/fault_${mode}_after.log" | head -3 | tr '\n' ' ')"
  note "$mode: server log: $(grep -E -i 'critical|error|lost|mps|exit|stopped' "$out/fault_server_$mode.log" | head -6 | tr '\n' ' ')"
  kill -TERM $server 2>/dev/null; wait $server; note "$mode: server exit status $?"
  if [ $mode = mps ]; then
    note "mps: daemon log: $(grep -i -E 'fault|error|exit' "$CUDA_MPS_LOG_DIRECTORY"/*.log 2>/dev/null | tail -5 | tr '\n' ' ')"
    echo quit | nvidia-cuda-mps-control; sleep 1
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
done
