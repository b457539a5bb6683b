# shellcheck shell=bash
# One GPU against two (sourced by serving-h200.sh): the same load and the same
# clients in all on a server of GPU 0 alone and on a server of both GPUs,
# with the host's and the server's CPU time and each GPU's busy share (mg).

devices_flag() {  # DEVICES: the server's --cuda_devices (none on the CPU backend)
  [ "$backend" = cuda ] && echo "--cuda_devices=$1"
}
two_gpus() { [ "$gpus" -ge 2 ] || [ "$backend" != cuda ]; }

# rows_rate RUN ROWS GPUS: the rows/s of RUN's loadgens (RUN-a and RUN-b when
# there are two), in all and per GPU.
rows_rate() {
  local run=$1 rows=$2 n=$3
  cat "$raw/$run"-[ab].txt 2>/dev/null | awk -v rows="$rows" -v n="$n" -v run="$run" '
    /^concurrency/ {r += $3}
    END {printf "%s: %.0f rows/s in all, %.0f per GPU (%d rows a request, %d GPU)\n",
         run, r * rows, r * rows / n, rows, n}' | tee -a "$out/summary.txt"
}

# gpu_split RUN ROWS CLIENTS MODES...: the load in the array `base` (ROWS
# rows a request), CLIENTS clients in all, in each of MODES:
#   g1:     a server of GPU 0, one loadgen exporting on GPU 0
#   g2-one: a server of both GPUs, one loadgen spread over both (--ipc_device=0,1)
#   g2-two: a server of both GPUs, one loadgen per GPU (half the clients each)
gpu_split() {
  local run=$1 rows=$2 clients=$3 mode
  shift 3
  for mode in "$@"; do
    case $mode in
      g1)
        start_server $(devices_flag 0)
        mg "$run-g1" "--concurrency=$clients --ipc_device=0"
        rows_rate "$run-g1" "$rows" 1
        ;;
      g2-one)
        start_server $(devices_flag 0,1)
        mg "$run-g2-one" "--concurrency=$clients --ipc_device=0,1"
        rows_rate "$run-g2-one" "$rows" 2
        ;;
      g2-two)
        start_server $(devices_flag 0,1)
        mg "$run-g2-two" "--concurrency=$((clients / 2)) --ipc_device=0" \
          "--concurrency=$((clients / 2)) --ipc_device=1"
        rows_rate "$run-g2-two" "$rows" 2
        ;;
    esac
    stop_server
  done
}

# The IPC decode load (4 x 256K a request, the message path's load) and a
# load the GPUs bound (64 x 1M a request), 64 clients in all, 2 s measured
# after 1 s of warm-up.
step_twogpu() {
  two_gpus || { note "twogpu skipped: one GPU"; return; }
  budget_start "${TWOGPU_BUDGET_S:-600}"
  log "one GPU vs two: IPC decode load (64 clients, 4 x 256K, every 50th answer verified)"
  base=(--transport="$ipc" --call=pipeline --workload=decode --rows_per_request=4 --width=262144
    --duration_s=2 --warmup_s=1 --verify_every=50)
  gpu_split twogpu-decode 4 64 g1 g2-one g2-two
  log "one GPU vs two: 64 x 1M per request by IPC (64 clients, 1 answer in 1000 verified)"
  base=(--transport="$ipc" --call=pipeline --workload=fixed --rows=64 --width=1048576
    --duration_s=2 --warmup_s=1 --verify_every=1000)
  gpu_split twogpu-big 64 64 g1 g2-one g2-two
}
