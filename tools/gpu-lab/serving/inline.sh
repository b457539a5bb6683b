# shellcheck shell=bash
# Rows sent inline in the message: 64 x 128K FP32 (33.5 MB a request) against
# the pinned host-to-device copy of the same bytes, and the staging alone
# (sourced by serving-h200.sh).

# One pinned cudaMemcpy of 64 x 128K FP32 on GPU 0 (torch), median of 50: the
# floor under the server's device stage for this request.
pinned_copy() {
  timeout 60 python3 - <<'PY' 2>&1 | tail -1 | tee -a "$out/summary.txt"
import torch
n = 64 * 131072
src = torch.randn(n).pin_memory()
dst = torch.empty(n, device="cuda")
for _ in range(5):
    dst.copy_(src, non_blocking=True)
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
for _ in range(50):
    start.record(); dst.copy_(src, non_blocking=True); end.record(); end.synchronize()
    times.append(start.elapsed_time(end))
times.sort()
print("pinned_h2d_ms p50 %.3f min %.3f for %d bytes (%.1f GB/s)" %
      (times[25], times[0], n * 4, n * 4 / times[25] / 1e6))
PY
}

# inline_runs VARIANT...: 64 x 128K inline at 1 and 8 clients, every 10th
# answer verified, each variant on a fresh server on GPU 0:
#   default: the server as shipped    arenas0: glibc's default malloc arenas
#   cached:  staging with cached stores instead of streaming ones
#   copy8:   8 staging copy threads
# Each summary line: per client count, req/s, p50 and the server's time (its
# device stage: staging copy, upload and selection).
inline_runs() {
  local variant
  for variant in "$@"; do
    [ "$budget" -eq 0 ] || [ "$(left)" -gt 12 ] || { note "inline-$variant skipped (budget)"; continue; }
    local flags=("${one_gpu[@]}")
    case $variant in
      arenas0) flags+=(--malloc_arenas=0) ;;
      cached) flags+=(--staging_streaming_stores=false) ;;
      copy8) flags+=(--copy_threads=8) ;;
    esac
    start_server "${flags[@]}"
    lg "inline-64x131072-$variant" --rows=64 --width=131072 --concurrency=1,8 --duration_s=1.5 \
      --warmup_s=0.5 --verify_every=10
    note "inline-$variant: $(rates "inline-64x131072-$variant")"
    stop_server
  done
}

step_inline() {
  log "inline 64 x 128K at 1 and 8 clients beside a pinned copy of the same bytes, GPU 0"
  pinned_copy
  inline_runs default arenas0 cached copy8
}

# The inline staging alone (staging_bench, GPU 0): copy threads x gRPC slice
# sizes x staging chunk sizes, the copy with and without the uploads, against
# one pinned upload of the same 33.5 MB.
step_staging() {
  [ -x "$bin/staging_bench" ] || { note "staging_bench: not packed"; return; }
  log "inline staging alone (64 x 128K FP32): copy threads x slice x chunk sizes, GPU 0"
  timeout 120 "$bin/staging_bench" --threads=1,2,4,8,16 --slice_bytes=16384,262144,33554432 \
    --chunk_bytes=262144,524288,2097152 --repeats=9 >"$out/staging_bench.txt" 2>&1
  note "staging_bench rc=$? (staging_bench.txt)"
  grep -E 'pinned upload, one call' "$out/staging_bench.txt" | tee -a "$out/summary.txt"
}
