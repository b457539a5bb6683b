#!/usr/bin/env bash
# The serving checks and figures on a GPU machine, from a relocatable CUDA build
# (bin/, lib/, python/, proto/, python-tests/ under ROOT), in one call. This
# file is the driver: arguments, the server's start and stop, and the loadgen
# helpers; the steps live in serving/*.sh beside it, named after what they
# measure, and run in the order given:
#   suites   (serving/suites.sh):  the region, SIGBUS, pipeline, select, fault,
#            coalescing and half-precision suites on the CUDA backend, the CUDA
#            IPC region test (a second process exports), the torch client
#   latency  (serving/latency.sh): Echo vs unary vs pipelined Select by
#            reference; inline vs shm vs ipc, unary and pipelined, for 1 x 128K,
#            8 x 1M and 64 x 128K at 1 and 8 clients; coalescing's cost
#   dtype    (serving/latency.sh): FP32 vs BF16 vs FP16, inline and IPC
#   decode   (serving/decode.sh):  64 clients x 4 rows x 256K over IPC and
#            inline, coalescing on/off
#   workers  (serving/decode.sh):  the IPC decode load with 1, 2 and 4 workers
#            per GPU x coalescing off/on, each on a fresh server
#   diag     (serving/decode.sh):  the IPC decode load at 16/32/64 clients with
#            the host's CPU use, the server's CPU time and its threads' states
#   inline   (serving/inline.sh):  64 x 128K inline at 1 and 8 clients beside a
#            pinned cudaMemcpy of the same bytes: the default server, one
#            malloc arena, cached staging stores, 8 copy threads
#   staging  (serving/inline.sh):  the inline staging alone (staging_bench)
#   twogpu   (serving/twogpu.sh):  one GPU vs two (when two are visible): the
#            IPC decode load and a GPU-bound load (64 rows per request), one
#            loadgen spread over the GPUs and one per GPU, each GPU's busy share
#   final    (serving/final.sh):   the closing call inside FINAL_BUDGET_S: the
#            suites first, then the GPU-bound two-GPU figure and inline 64 x 128K
# Every loadgen step verifies answers; one CSV (serving_h200.csv, a `run`
# column naming the configuration) and summary.txt go to OUT_DIR.
# Usage: serving-h200.sh ROOT OUT_DIR [steps]   (steps: comma separated)
# SERVING_BACKEND=cpu (and SERVING_TRANSPORT=shm for the IPC steps) is a dry
# run of the script on a machine without a GPU, from a CPU build's binaries.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$1" && pwd) out=$2
steps=${3:-suites,latency,decode,diag,inline,dtype,twogpu}
backend=${SERVING_BACKEND:-cuda}
ipc=${SERVING_TRANSPORT:-ipc}
server_bin=topk-server loadgen_bin=topk-loadgen
one_gpu=(--cuda_devices=0)  # a server on GPU 0 alone (the CPU backend takes no devices)
[ "$backend" = cuda ] || one_gpu=()
mkdir -p "$out"
bin=$root/bin raw=$out/raw
mkdir -p "$raw"
sock=/tmp/topk-serving.sock
csv=$out/serving_h200.csv
log() { echo "== $*" | tee -a "$out/summary.txt"; }
note() { echo "$*" | tee -a "$out/summary.txt"; }
nvidia-smi -L 2>&1 | tee -a "$out/summary.txt"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# A step's time budget: budget_start SECONDS, then $(left) is what remains.
budget=0 began=0
budget_start() { budget=$1 began=$SECONDS; }
left() { echo $((budget - (SECONDS - began))); }

server=
start_server() {  # flags...
  rm -f "$sock"
  "$bin/$server_bin" --backend="$backend" --enable_regions --enable_echo --listen="unix:$sock" \
    --metrics_listen= --max_k=2048 "$@" >>"$raw/server.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
}
stop_server() { [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server"; server=; }
trap stop_server EXIT

# lg RUN loadgen-flags...: one loadgen run, its steps appended to the CSV.
lg() {
  local run=$1
  shift
  timeout 90 "$bin/$loadgen_bin" --target="unix:$sock" --k=2048 --lengths=full --variants=2 \
    --duration_s=2 --warmup_s=0.5 --verify_every=20 --progress=false --csv="$raw/$run.csv" \
    "$@" >"$raw/$run.txt" 2>&1
  echo "$run rc=$?" >>"$out/summary.txt"
  csv_append "$run"
}
csv_append() {  # RUN: the loadgen CSV raw/RUN.csv into the combined CSV
  [ -s "$raw/$1.csv" ] || return 0
  [ -s "$csv" ] || { printf 'run,'; head -1 "$raw/$1.csv"; } >"$csv"
  tail -n +2 "$raw/$1.csv" | sed "s/^/$1,/" >>"$csv"
}
# The loadgen's closed-loop lines of RUN: clients, req/s, p50 and the server's time.
rates() {
  grep -E '^concurrency' "$raw/$1.txt" 2>/dev/null |
    awk '{printf "c=%s %s req/s p50 %s ms srv %s ms; ", $2, $3, $6, $11}'
}

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
host_busy() { awk 'NR==1 {t=0; for (i=2;i<=NF;i++) t+=$i; print $2+$3+$4+$7+$8, t}' /proc/stat; }

# mg RUN "loadgen-a flags" ["loadgen-b flags"]: one or two loadgens at once on
# the running server, with the flags in the array `base` first (word-split
# flags after); their steps go to the CSV as RUN-a / RUN-b, and summary.txt
# gets the host's busy share, the server's CPU seconds, each loadgen's rate
# (and per-GPU lines) and CPU seconds, and each GPU's busy share.
mg() {
  local run=$1 a=$2 b=${3:-} other=
  [ "$(left)" -gt 9 ] || { note "$run skipped (budget)"; return; }
  local busy0 total0 srv0
  read -r busy0 total0 <<<"$(host_busy)"
  srv0=$(cpu_of "$server")
  if [ -n "$b" ]; then
    # shellcheck disable=SC2086
    timeout 60 "$bin/$loadgen_bin" --target="unix:$sock" --k=2048 --lengths=full --variants=2 \
      --progress=false "${base[@]}" $b --csv="$raw/$run-b.csv" >"$raw/$run-b.txt" 2>&1 &
    other=$!
  fi
  # Which processes hold a context on which GPU, 2 s in.
  (sleep 2; nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader
    ps -eo pid,args | grep -E 'topk-(server|loadgen)' | grep -v grep) >"$raw/$run.apps" 2>&1 &
  local apps=$!
  # Each GPU's busy share (kernels running) every 200 ms for the whole run,
  # each sample stamped by nvidia-smi; averaged below over the measured
  # seconds that end with the last busy sample (the loadgen's setup and
  # teardown leave the GPUs idle).
  timeout 120 nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader,nounits \
    -lms 200 >"$raw/$run.util" 2>/dev/null &
  local util=$!
  # shellcheck disable=SC2086
  lg "$run-a" "${base[@]}" $a
  wait "$apps"
  if [ -n "$other" ]; then
    wait "$other"
    echo "$run-b rc=$?" >>"$out/summary.txt"
    csv_append "$run-b"
  fi
  kill "$util" 2>/dev/null
  wait "$util" 2>/dev/null
  # The server's CPU seconds so far by thread name (since this server started).
  for task in /proc/"$server"/task/*; do
    printf '%s %s\n' "$(tr ' ' _ <"$task/comm")" "$(awk '{print $14 + $15}' "$task/stat")"
  done 2>/dev/null | awk '{t[$1] += $2; n[$1]++} END {for (k in t) printf "%s x%d %d\n", k, n[k], t[k]}' |
    sort -k3 -nr >"$raw/$run.server-threads"
  local busy1 total1 measured
  read -r busy1 total1 <<<"$(host_busy)"
  measured=$(grep -oE -- '--duration_s=[0-9.]+' <<<"${base[*]} $a" | tail -1 | cut -d= -f2)
  local line="$run: host busy $((100 * (busy1 - busy0) / (total1 - total0 + 1)))% of $(nproc)"
  line+=" cores, server cpu $(($(cpu_of "$server") - srv0))/100 s"
  for side in a b; do
    [ -s "$raw/$run-$side.txt" ] || continue
    line+="; $side: $(grep -E '^concurrency' "$raw/$run-$side.txt" |
      awk '{printf "%s req/s p50 %s ms", $3, $6}') $(grep -E 'client cpu|gpu[0-9]:' \
      "$raw/$run-$side.txt" | sed 's/^ *//' | tr '\n' ' ')"
  done
  line+="; gpu busy % over the last ${measured:-2} s of load: $(awk -F', *' -v span="${measured:-2}" '
    {split($1, d, " "); split(d[2], c, ":"); t[NR] = c[1] * 3600 + c[2] * 60 + c[3]
     g[NR] = $2; u[NR] = $3; if ($3 > 0) end = t[NR]}
    END {for (i = 1; i <= NR; i++) if (end && t[i] <= end && t[i] > end - span) {
           s[g[i]] += u[i]; n[g[i]]++}
         for (k in s) printf "gpu%s %.0f (%d samples) ", k, s[k] / n[k], n[k]}' \
    "$raw/$run.util" 2>/dev/null)"
  note "$line"
}

for file in "$here"/serving/*.sh; do
  # shellcheck source=/dev/null
  source "$file"
done
IFS=, read -r -a wanted <<<"$steps"
for step in "${wanted[@]}"; do
  if declare -F "step_$step" >/dev/null; then
    budget=0  # no budget unless the step sets one
    "step_$step"
  else
    note "unknown step: $step"
  fi
done

log "results"
[ -s "$csv" ] && python3 - "$csv" <<'PY' | tee -a "$out/summary.txt"
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print("%-42s c=%-3s req/s=%9s p50=%7s p99=%7s srv=%7s dev=%7s batch=%6s inexact=%s err=%s" % (
        r["run"], r["setting"], r["req_per_s"], r["p50_us"], r["p99_us"], r["server_total_us"],
        r["server_device_us"], r["batch_mean"], r["inexact"], r["errors"]))
PY
tar -C "$out" -czf "$out/raw.tgz" raw && rm -rf "$raw"
