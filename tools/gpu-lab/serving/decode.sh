# shellcheck shell=bash
# The decode-like load: 64 clients, 4 rows x 256K per request, K = 2048
# (sourced by serving-h200.sh).
decode_load=(--call=pipeline --workload=decode --rows_per_request=4 --width=262144)

# By IPC and inline, coalescing off (queue delay 0) and on (the default).
step_decode() {
  local delay
  for delay in 0 default; do
    local flags=()
    [ "$delay" = 0 ] && flags=(--max_queue_delay_us=0)
    start_server "${flags[@]}"
    lg "decode-$ipc-delay$delay" --transport="$ipc" "${decode_load[@]}" --concurrency=64 \
      --duration_s=3
    lg "decode-inline-delay$delay" --workload=decode --rows_per_request=4 --width=262144 \
      --concurrency=64 --duration_s=3
    stop_server
  done
}

# By IPC against workers per GPU and coalescing, each on a fresh server on
# GPU 0: every worker's launch fills the GPU, so few workers with large
# batches may beat many with small ones. mg adds the host's and the server's
# CPU time and the GPU's busy share.
step_workers() {
  log "decode load by IPC (64 clients, 4 x 256K): workers per GPU x coalescing"
  budget_start "${WORKERS_BUDGET_S:-600}"
  base=(--transport="$ipc" "${decode_load[@]}" --duration_s=2 --warmup_s=1 --verify_every=50)
  local workers delay
  for workers in 1 2 4; do
    for delay in 0 100; do
      start_server "${one_gpu[@]}" --workers=$workers --max_queue_delay_us=$delay
      mg "workers$workers-delay$delay" "--concurrency=64 --ipc_device=0"
      stop_server
    done
  done
}

# Where the decode load's time goes: host CPU busy share, the server's CPU
# seconds and its threads' states, at 16, 32 and 64 clients, no verification.
step_diag() {
  log "decode load by clients: host CPU, server CPU, server threads running (R) vs sleeping"
  note "cores: $(nproc)"
  start_server
  local c busy0 total0 busy1 total1 srv0 srv1 sampler
  for c in 16 32 64; do
    read -r busy0 total0 <<<"$(host_busy)"
    srv0=$(cpu_of "$server")
    (for _ in $(seq 10); do
      sleep 0.4
      cat /proc/"$server"/task/*/stat 2>/dev/null | awk '{print $3}' | sort | uniq -c | tr '\n' ' '
      echo
    done) >"$raw/threads-c$c.txt" &
    sampler=$!
    lg "diag-decode-$ipc-c$c" --transport="$ipc" "${decode_load[@]}" --concurrency=$c \
      --duration_s=4 --warmup_s=0.5 --verify_every=0
    wait $sampler
    read -r busy1 total1 <<<"$(host_busy)"
    srv1=$(cpu_of "$server")
    note "c=$c host busy $((100 * (busy1 - busy0) / (total1 - total0 + 1)))% of $(nproc) cores;" \
      "server cpu $((srv1 - srv0))/100 s over ~4.5 s; thread states (last sample):" \
      "$(tail -1 "$raw/threads-c$c.txt")"
  done
  stop_server
}
