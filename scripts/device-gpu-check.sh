#!/usr/bin/env bash
# The GPU check, in ONE device call (run from the repo root on the GPU machine
# with the relocatable build carried in .carry/dist, see scripts/device-gpu-pack.sh):
#   1. the GPU test suite (and the device-free planner tests),
#   2. compute-sanitizer memcheck and racecheck on a small configuration,
#   3. topk-bench-gpu + torch.topk baseline + plot.
# Logs, CSVs and the PNG go to $OUT; a short table is printed last.
# usage: scripts/device-gpu-check.sh [smoke|round2|round3|round5|full]
#   round5: the suite, memcheck + racecheck on the register-resident route's
#   small cases, and the short-row A/B (register route vs the two-pass
#   row-local route, same data; then the old default route) only.
#   The suite runs every test on both persistent kernel variants (512 x 2 and
#   256 x 4 CTAs/SM); the sanitizer filters match both.
#   round2: the suite, sanitizer, the 32-shape bench, one-CTA-per-row A/B on
#   the decode shapes, torch baseline.
#   round3: the suite, sanitizer, the 32-shape bench with the 4 x 256 variant
#   timed beside the default on the same data (alt columns), torch baseline,
#   then the 20-shape matrix again with the order reversed (noise and order
#   check; CSV ours_rev.csv).
set -uo pipefail
mode=${1:-full}
OUT=${OUT:-/tmp/topk-out}
mkdir -p "$OUT"
bin=.carry/dist/bin
export PYTHONUNBUFFERED=1
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

if [ "$mode" = round5 ]; then
  {
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used,memory.total --format=csv
    "$bin/topk-plan" --explain | head -30
    "$bin/topk_cuda_planner_test" --gtest_brief=1
    timeout 120 "$bin/topk_cuda_test"
    echo "topk_cuda_test rc=$?"
  } >"$OUT/tests.log" 2>&1
  grep -E "PASSED|FAILED|rc=|^\[  FAILED" "$OUT/tests.log" | tail -20
  {
    echo "== memcheck"
    timeout 45 "$sanitizer" --tool memcheck --leak-check no "$bin/topk_cuda_test" \
      --gtest_filter='*RegisterExactTest.SanitizerSmall/Cta2x512:*RegisterExactTest.NanRows*/Cta2x512'
    echo "memcheck rc=$?"
    echo "== racecheck"
    timeout 50 "$sanitizer" --tool racecheck "$bin/topk_cuda_test" \
      --gtest_filter='*RegisterExactTest.SanitizerSmall/Cta2x512'
    echo "racecheck rc=$?"
  } >"$OUT/sanitizer.log" 2>&1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/sanitizer.log"
  short=2048:4096,2048:8192,2048:16384,512:16384
  # ours = register route, exact = two-pass row-local route (same data).
  timeout 30 "$bin/topk-bench-gpu" --csv "$OUT/round5_ab.csv" --register-exact \
    --shapes "$short" --reps 30 \
    >"$OUT/bench.log" 2>&1
  echo "bench rc=$?"
  # The old default (register route off) for the same shapes.
  timeout 30 "$bin/topk-bench-gpu" --csv "$OUT/round5_old_default.csv" --no-register-exact \
    --shapes "$short" --reps 30 2>&1 | sed 's/^/old /' >>"$OUT/bench.log"
  echo "old bench rc=$?"
  grep -E "^(M=|old M=|# wrote|old # wrote)" "$OUT/bench.log" | sed -E 's/  scan [0-9.]+//'
  exit 0
fi

{
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used,memory.total --format=csv
  "$bin/topk-plan" --explain | head -60
  "$bin/topk_cuda_planner_test" --gtest_brief=1
  timeout 150 "$bin/topk_cuda_test"
  echo "topk_cuda_test rc=$?"
} >"$OUT/tests.log" 2>&1
grep -E "PASSED|FAILED|rc=|^\[  FAILED" "$OUT/tests.log" | tail -20

{
  echo "== memcheck"
  timeout 100 "$sanitizer" --tool memcheck --leak-check no "$bin/topk_cuda_test" \
    --gtest_filter='*SanitizerSmall*:*NanRows*:*WarpSegmentOverflow*:*KvSplitGraphReplay*:*NarrowValueRanges*'
  echo "memcheck rc=$?"
  echo "== racecheck"
  timeout 80 "$sanitizer" --tool racecheck "$bin/topk_cuda_test" \
    --gtest_filter='*SanitizerSmall*:*KvSplitGraphReplay*:*WarpSegmentOverflow*'
  echo "racecheck rc=$?"
} >"$OUT/sanitizer.log" 2>&1
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/sanitizer.log"

if [ "$mode" = smoke ]; then
  shapes=512:131072,4096:262144,2048:1048576,8:524288
  bench_args=(--shapes "$shapes" --reps 10)
  torch_args=(--shapes "$shapes" --reps 5)
elif [ "$mode" = round3 ]; then
  bench_args=(--alt-ctas-per-sm 4)
  torch_args=()
else
  bench_args=()
  torch_args=()
fi
timeout 200 "$bin/topk-bench-gpu" --csv "$OUT/ours.csv" "${bench_args[@]}" >"$OUT/bench.log" 2>&1
echo "bench rc=$?"
matrix=$(for n in 131072 262144 524288 1048576; do for m in 512 1024 2048 4096 8192; do
  printf '%s:%s,' $m $n; done; done)
# A/B on the 20-shape matrix: L2 prefetch on, 4 CTAs/SM (CSV); KV-split on the
# decode shapes (stdout).
if [ "$mode" = full ]; then
  timeout 200 "$bin/topk-bench-gpu" --csv /tmp/prefetch.csv --prefetch \
    --shapes "${matrix%,}" --reps 12 2>&1 | grep -v "^#" | sed 's/^/prefetch /' >>"$OUT/bench.log"
  timeout 200 "$bin/topk-bench-gpu" --csv "$OUT/ours_cta4.csv" --ctas-per-sm 4 \
    --shapes "${matrix%,}" --reps 12 2>&1 | grep -v "^#" | sed 's/^/cta4 /' >>"$OUT/bench.log"
fi
# Decode shapes with one CTA per row (KV-split off): the A/B of the split.
if [ "$mode" != smoke ] && [ "$mode" != round3 ]; then
  timeout 120 "$bin/topk-bench-gpu" --csv /tmp/percta.csv --no-kv-split --reps 20 \
    --shapes 1:131072,8:131072,64:131072,1:262144,8:262144,64:262144,1:524288,8:524288,64:524288,1:1048576,8:1048576,64:1048576 \
    2>&1 | grep -v "^#" | sed 's/^/percta /' >>"$OUT/bench.log"
fi
# Short-row crossover: sampled vs exact route (the "exact" column) at N 16K..64K.
if [ "$mode" = full ]; then
  echo "== crossover" >>"$OUT/bench.log"
  timeout 120 "$bin/topk-bench-gpu" --csv /tmp/crossover.csv --reps 10 \
    --shapes 2048:16384,2048:32768,2048:65536,512:16384,512:65536 2>&1 | grep -v "^#" \
    >>"$OUT/bench.log"
fi
timeout 200 python3 bench/gpu/torch_baseline.py --csv "$OUT/torch.csv" "${torch_args[@]}" \
  >>"$OUT/bench.log" 2>&1
echo "torch rc=$?"
python3 bench/gpu/plot.py --ours "$OUT/ours.csv" --torch "$OUT/torch.csv" \
  --out-csv "$OUT/bench_gpu_merged.csv" --png "$OUT/bench_gpu.png" 2>&1 | tee -a "$OUT/bench.log"
# Round 3: the matrix again, variants in the other order (4 x 256 first).
if [ "$mode" = round3 ]; then
  timeout 150 "$bin/topk-bench-gpu" --csv "$OUT/ours_rev.csv" --ctas-per-sm 4 \
    --alt-ctas-per-sm 2 --shapes "${matrix%,}" --reps 15 2>&1 | sed 's/^/rev /' >>"$OUT/bench.log"
  echo "rev bench rc=$?"
fi
if [ "$mode" = round3 ]; then
  grep -E "^(rev   alt M=|rev # wrote|# wrote .*inexact)" "$OUT/bench.log"
  python3 bench/gpu/plot.py --ours "$OUT/ours.csv" --torch "$OUT/torch.csv" \
    --out-csv /tmp/merged.csv --png /tmp/p.png 2>&1 | sed -n '/blk/,/A\/B geomeans/p'
else
  grep -E "^(# read|M=|percta M=)" "$OUT/bench.log" | sed -E 's/  (exact|scan) [0-9.]+//g'
fi
