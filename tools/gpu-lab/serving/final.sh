# shellcheck shell=bash
# The closing call (sourced by serving-h200.sh), inside FINAL_BUDGET_S
# (default 150 s), the checks first so that time never cuts them:
#   1. the serving suites on the CUDA backend, the SIGBUS suite first, with
#      region_cuda_test and the torch client beside them (on GPU 1 when
#      there are two);
#   2. a load the GPUs bound: 64 rows x 1M a request by IPC, 64 clients in
#      all, one answer in 1000 verified, 2 s measured after 1 s of warm-up:
#      a server of GPU 0 with one loadgen on GPU 0, against a server of both
#      GPUs with one loadgen spread over both; rows/s per GPU and each GPU's
#      busy share;
#   3. inline 64 x 128K at 1 and 8 clients on GPU 0 beside a pinned
#      cudaMemcpy of the same bytes (the inline step's reference).
step_final() {
  budget_start "${FINAL_BUDGET_S:-150}"
  local mark
  mark=$(wc -l <"$out/summary.txt")
  # FINAL_SUITES=0: the suites ran earlier in the same call (the `suites` step).
  if [ "${FINAL_SUITES:-1}" != 0 ]; then
    log "final: suites on the $backend backend (SIGBUS first); region_cuda_test and the torch client beside them"
    run_all_suites 60
  fi
  # A check passes with exit status 0 and gtest's PASSED line (the torch
  # client by its exit status); skipped tests validated nothing, so they are
  # counted apart.
  local passed
  passed=$(tail -n +"$((mark + 1))" "$out/summary.txt" | awk '
    /^[a-z_]+_test(: not packed| rc=| skipped)/ {
      n++; p += / rc=0 / && (/PASSED/ || /^torch_ipc_test/); s += /SKIPPED/}
    END {printf "%d of %d checks passed, %d with skipped tests", p, n, s}')
  [ "${FINAL_SUITES:-1}" != 0 ] && note "final: $passed (expected: 8 of 8, 0 skipped)"

  log "final: 64 x 1M per request by IPC, ${FINAL_CLIENTS:-64} clients, one GPU vs two (one loadgen spread over both)"
  if two_gpus; then
    # FINAL_WIDTH: narrower rows for a dry run on the CPU backend.
    base=(--transport="$ipc" --call=pipeline --workload=fixed --rows=64 --width="${FINAL_WIDTH:-1048576}"
      --duration_s=2 --warmup_s=1 --verify_every=1000)
    # FINAL_CLIENTS: closed-loop clients in all (default 64).
    gpu_split final-big 64 "${FINAL_CLIENTS:-64}" g1 g2-one
  else
    note "final: one GPU visible, the two-GPU figure skipped"
  fi

  # FINAL_INLINE=0: the inline figures are not wanted in this call.
  if [ "${FINAL_INLINE:-1}" != 0 ]; then
    log "final: inline 64 x 128K at 1 and 8 clients on GPU 0, beside a pinned copy of the same bytes"
    pinned_copy
    inline_runs default
  fi
  note "final: $((SECONDS - began)) s of $budget"
}
