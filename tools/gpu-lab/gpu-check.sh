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
#   shortrows: the short-row crossover (N 4K..64K x M 256..8192, K 512 and
#              2048, K 1024 at M = 4096): the short-row route forced against the
#              selector with it off, on the same data, with the floor and
#              torch.topk (K = 2048); merged into h200_short_rows.csv
# usage: tools/gpu-lab/gpu-check.sh [smoke|full] [tests,sanitizer,bench,shortrows]
#   smoke: 4 shapes, few repetitions; full: the matrix. The second argument
#   picks the steps (default: the first three), so a device call can run a subset.
set -uo pipefail
mode=${1:-full}
steps=${2:-tests,sanitizer,bench}
OUT=${OUT:-/tmp/topk-out}
mkdir -p "$OUT"
bin=${TOPK_GPU_DIST:-.carry/gpu}/bin
export PYTHONUNBUFFERED=1
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# Every rare path (RecoveryPathTest.*) and the small cases, both variants; the
# short-row route's re-scan fallback and infinity floods.
sanitizer_filter='*RecoveryPathTest.*:*SanitizerSmall*:*NanRowsAndBadLengths*:*KvSplitGraphReplay*'
sanitizer_filter+=':*ShortRowRouteTest.BoundaryBin*:*ShortRowRouteTest.Infinity*'
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
if has shortrows; then
  raw=$(mktemp -d)
  shapes=$(for n in 4096 8192 16384 32768 65536; do for m in 256 1024 4096 8192; do
    printf '%s:%s,' $m $n; done; done)
  shapes=${shapes%,}
  force=1048576
  {
    for k in 2048 512 1024; do
      s=$shapes
      [ $k = 1024 ] && s=4096:4096,4096:8192,4096:16384,4096:32768,4096:65536
      timeout 120 "$bin/topk-bench-gpu" --k=$k --csv="$raw/short_rows_k$k.csv" --shapes="$s" \
        --reps=20 --short_rows=0 --alt_short_rows=$force
      echo "short-row A/B k=$k rc=$?"
    done
    timeout 150 python3 bench/gpu/torch_baseline.py --k 2048 --reps 20 \
      --csv "$raw/short_rows_torch.csv" --shapes "$shapes"
    echo "torch rc=$?"
    python3 bench/gpu/short_rows_table.py --ours "$raw"/short_rows_k*.csv \
      --torch "$raw/short_rows_torch.csv" --out-csv "$OUT/h200_short_rows.csv"
    echo "table rc=$?"
  } >"$OUT/short_rows.log" 2>&1
  tar -C "$raw" -czf "$OUT/short_rows_raw.tgz" .
  grep -E "rc=|inexact|^ *[0-9]+ +[0-9]+ +[0-9]+ |^  alt|^# read" "$OUT/short_rows.log"
  grep -q "rc=[1-9]" "$OUT/short_rows.log" && rc_all=1
fi
exit $rc_all
