#!/usr/bin/env bash
# The kernels' GPU check, run from the repo root on the GPU machine with the
# relocatable build of pack-gpu.sh carried in .carry/gpu. Logs, CSVs and the
# PNG go to $OUT; a short table is printed last.
#   tests:     the planner tests, the key-map device check, the whole GPU suite
#              (every test on both kernel variants, Cta2x512 and Cta4x256)
#   sanitizer: compute-sanitizer memcheck AND racecheck on every test that
#              reaches band rescue, exact recovery, the re-scan fallbacks, the
#              KV-split underfill, NaN rows and graph replays, both variants
#   bench:     topk-bench-gpu on the 20-shape matrix (M 512..8192 x N 128K..1M,
#              K = 2048) with its floor, the baseline build's binary on the same
#              shapes when packed (bin/topk-bench-gpu-baseline), torch.topk on
#              the same shapes, and the merged CSV and plot
# usage: tools/gpu-lab/gpu-check.sh [smoke|full] [tests,sanitizer,bench]
#   smoke: 4 shapes, few repetitions; full: the matrix. The second argument
#   picks the steps (default: all three), so a device call can run a subset.
set -uo pipefail
mode=${1:-full}
steps=${2:-tests,sanitizer,bench}
OUT=${OUT:-/tmp/topk-out}
mkdir -p "$OUT"
bin=${TOPK_GPU_DIST:-.carry/gpu}/bin
export PYTHONUNBUFFERED=1
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# Every rare path (RecoveryPathTest.*) and the small cases, both variants.
sanitizer_filter='*RecoveryPathTest.*:*SanitizerSmall*:*NanRowsAndBadLengths*:*KvSplitGraphReplay*'
rc_all=0
has() { [[ ",$steps," == *",$1,"* ]]; }

if has tests; then
  {
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used,memory.total --format=csv
    "$bin/topk-plan" --explain | head -60
    "$bin/cuda_planner_test" --gtest_brief=1
    echo "cuda_planner_test rc=$?"
    "$bin/topk_cuda_key_maps_test" --gtest_brief=1
    echo "topk_cuda_key_maps_test rc=$?"
    timeout 300 "$bin/topk_cuda_test"
    echo "topk_cuda_test rc=$?"
  } >"$OUT/tests.log" 2>&1
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|rc=|: sampled " "$OUT/tests.log" | tail -30
  grep -q "rc=[1-9]" "$OUT/tests.log" && rc_all=1
fi

if has sanitizer; then
  {
    echo "== memcheck"
    timeout 240 "$sanitizer" --tool memcheck --leak-check no "$bin/topk_cuda_test" \
      --gtest_filter="$sanitizer_filter"
    echo "memcheck rc=$?"
    echo "== racecheck"
    timeout 300 "$sanitizer" --tool racecheck "$bin/topk_cuda_test" \
      --gtest_filter="$sanitizer_filter"
    echo "racecheck rc=$?"
  } >"$OUT/sanitizer.log" 2>&1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|^\[  (PASSED|FAILED)" "$OUT/sanitizer.log"
  grep -q "rc=[1-9]" "$OUT/sanitizer.log" && rc_all=1
fi

if has bench; then
  if [ "$mode" = smoke ]; then
    shapes=512:131072,4096:262144,2048:1048576,8:524288
    reps=(--reps=10)
  else
    shapes=$(for n in 131072 262144 524288 1048576; do for m in 512 1024 2048 4096 8192; do
      printf '%s:%s,' $m $n; done; done)
    shapes=${shapes%,}
    reps=()
  fi
  : >"$OUT/bench.log"
  if [ -x "$bin/topk-bench-gpu-baseline" ]; then
    # The baseline parses its own argv: space-separated values.
    timeout 240 "$bin/topk-bench-gpu-baseline" --csv "$OUT/baseline.csv" --shapes "$shapes" \
      ${reps[@]+--reps ${reps[0]#--reps=}} 2>&1 | sed 's/^/baseline /' >>"$OUT/bench.log"
    echo "baseline bench rc=${PIPESTATUS[0]}"
  fi
  timeout 240 "$bin/topk-bench-gpu" --csv="$OUT/ours.csv" --shapes="$shapes" "${reps[@]}" \
    >>"$OUT/bench.log" 2>&1
  echo "bench rc=$?"
  timeout 200 python3 bench/gpu/torch_baseline.py --csv "$OUT/torch.csv" --shapes "$shapes" \
    >>"$OUT/bench.log" 2>&1
  echo "torch rc=$?"
  baseline_arg=()
  [ -s "$OUT/baseline.csv" ] && baseline_arg=(--baseline "$OUT/baseline.csv")
  python3 bench/gpu/plot.py --ours "$OUT/ours.csv" --torch "$OUT/torch.csv" "${baseline_arg[@]}" \
    --out-csv "$OUT/h200_matrix.csv" --png "$OUT/h200_latency_vs_M.png" >>"$OUT/bench.log" 2>&1
  echo "plot rc=$?"
  grep -E "^(baseline )?(# read|M=)|inexact|^#|^ *[0-9]+ +[0-9]+ " "$OUT/bench.log" |
    sed -E 's/  (exact|scan) [0-9.]+//g'
fi
exit $rc_all
