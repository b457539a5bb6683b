#!/usr/bin/env bash
# The kernels' GPU check, run from the repo root on the GPU machine with the
# relocatable build of pack-gpu.sh carried in .carry/gpu. Logs, CSVs and the
# PNG go to $OUT; a short table is printed last.
#   tests:     the planner tests, the key-map device check, the whole GPU suite
#              (every test on both kernel variants, Cta2x512 and Cta4x256, and
#              on FP32, BF16 and FP16 rows: one process per type, in parallel)
#   sanitizer: compute-sanitizer memcheck AND racecheck on every test that
#              reaches band rescue, exact recovery, the re-scan fallbacks, the
#              KV-split underfill, NaN rows and graph replays, both variants;
#              the score types in TOPK_SANITIZE_DTYPES (default all three;
#              racecheck: TOPK_RACECHECK_DTYPES, default the same), one
#              process per type and tool, in parallel; racecheck leaves the
#              heaviest cases (race_heavy) to bigrace
#   bigrace:   racecheck of those on FP32, one process per instance, in
#              parallel
#   bench:     topk-bench-gpu on the 20-shape matrix (M 512..8192 x N 128K..1M,
#              K = 2048) with its floor, the baseline build's binary on the same
#              shapes when packed (bin/topk-bench-gpu-baseline), torch.topk on
#              the same shapes, and the merged CSV and plot
#   dtypes:    the 20-shape matrix on FP32 (with the baseline build when
#              packed), BF16 and FP16 rows (the same scores rounded), torch.topk
#              on FP32 and BF16 rows, merged by bench/gpu/dtype_table.py into
#              h200_matrix_bf16.csv
#   shortrows: the short-row crossover (N 4K..64K x M 256..8192, K 512 and
#              2048, K 1024 at M = 4096): the short-row route forced against the
#              selector with it off, on the same data, with the floor and
#              torch.topk (K = 2048); merged into h200_short_rows.csv
#   decode:    the decode shapes (1 x 128K/256K/1M, 8 x 128K/256K/1M, 16 x 1M,
#              32 x 512K, 64 x 1M; K = 2048): the cluster route's four variants
#              (8 or 16 CTAs per cluster x 1 or 2 CTAs per SM, forced), the
#              planner's choice and the selector with the cluster route off
#              (KV-split / persistent), on the same data, with the floor and
#              torch.topk (TOPK_DECODE_TORCH_CSV: an earlier run's instead); p50
#              and p99 of every repetition; merged by bench/gpu/decode_table.py
#              into h200_decode.csv
#   models:    the model shapes (K = 512 and 1024: M 1..2048 x N 64K..256K and 4096 x 64K;
#              K = 2048: M 1..8192 x N 32K..128K, 8 x 256K, 512 x 256K, 4096 x
#              8K / 32K), FP32 and BF16: ours, the baseline build when packed,
#              torch.topk, same data, median and p99; merged by
#              bench/gpu/model_table.py into h200_model_shapes.csv
# usage: tools/gpu-lab/gpu-check.sh [smoke|full] [tests,sanitizer,bigrace,bench,dtypes,shortrows,decode,models]
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
# (The cluster route's rare paths: ClusterRouteTest.SanitizerSmallRows, by the
# *SanitizerSmall* pattern above; the KV-split band's KvSplitBandTest.SanitizerSmall
# too.) RacecheckOneRowPerPath: the cluster case small enough for racecheck on
# the 16-CTA variants.
sanitizer_filter+=':*RacecheckOneRowPerPath*:*RacecheckBandRow*'
# Output staged for min(K, N_cap): K = 5000 and 2^20 over rows of <= 3000.
sanitizer_filter+=':*GraphRunnerTest.KBeyond*'
# The row trace's stamps on the persistent and KV-split routes.
sanitizer_filter+=':*WaveSplitTest.RowTrace*'
# The recovery paths at a size racecheck completes (the large RecoveryPathTest
# cases do not finish under racecheck in a call's time).
sanitizer_filter+=':*RacecheckRecoveryRows*'
# (The certification pass's shared-memory ring: CudaSelectorTest.RingSanitizerSmall,
# by *SanitizerSmall*; memcheck also takes its large case below.)
# memcheck also takes 16-bit rows of every pattern through every route (the
# general route included); racecheck: that kernel code is the rest's.
extra_memcheck=':*HalfPrecisionTest.*'
# The cases that take 1-2 minutes per instance under racecheck: the bigrace
# step runs them (FP32), one process per instance, in parallel; the racecheck
# step runs the rest (RacecheckRecoveryRows takes the recovery paths there at
# a size that finishes). The cluster route's SanitizerSmallRows outlasts both;
# its paths run under racecheck in its Racecheck* cases.
race_heavy='*RecoveryPathTest.DefaultViewAdversary*:*RecoveryPathTest.DegenerateLongRows*'
race_heavy+=':*RecoveryPathTest.WarpSegmentOverflow*:*RecoveryPathTest.BoundaryTies*'
race_heavy+=':*RecoveryPathTest.NarrowValueRanges*:*ClusterRouteTest.Racecheck*/Ranks16*'
race_skip="$race_heavy:*ClusterRouteTest.SanitizerSmallRows*"
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
    # One process per score type (the suites are CPU-bound on the reference
    # and the verifier); the type-free tests go with FP32.
    for t in fp32 bf16 fp16; do
      filter="*$t"
      [ $t = fp32 ] && filter+=':CAbi.*'
      (timeout "${TOPK_TEST_TIMEOUT:-300}" "$bin/topk_cuda_test" --gtest_filter="$filter" \
        >"$OUT/tests_$t.log" 2>&1; echo "topk_cuda_test $t rc=$?" >>"$OUT/tests_$t.log") &
    done
    wait
    cat "$OUT"/tests_fp32.log "$OUT"/tests_bf16.log "$OUT"/tests_fp16.log
    rm -f "$OUT"/tests_*.log
  } >"$OUT/tests.log" 2>&1
  # Each process's pass/fail lines and exit status (not the paths' printouts,
  # which would push the first types' results out of the tail).
  grep -E "^\[  (PASSED|FAILED)  \]|rc=" "$OUT/tests.log" | tail -40
  grep -q "rc=[1-9]" "$OUT/tests.log" && rc_all=1
fi

# The filter restricted to one score type (test names end in it).
typed_filter() { echo "$sanitizer_filter" | sed "s/:/$1:/g; s/\$/$1/"; }
if has bigrace; then
  # One racecheck process per heavy FP32 instance (gtest's list of them).
  instances=$("$bin/topk_cuda_test" --gtest_list_tests --gtest_filter="$race_heavy" |
    awk '/^[^ ]/ {suite = $1; next} {print suite $1}' | grep '_fp32$')
  {
    for test in $instances; do
      log="$OUT/bigrace_${test//\//_}.log"
      (echo "== racecheck $test"
       timeout "${TOPK_SANITIZER_TIMEOUT:-300}" "$sanitizer" --tool racecheck \
         "$bin/topk_cuda_test" --gtest_filter="$test"
       echo "racecheck $test rc=$?") >"$log" 2>&1 &
    done
    wait
    cat "$OUT"/bigrace_*.log
    rm -f "$OUT"/bigrace_*.log
  } >"$OUT/bigrace.log" 2>&1
  grep -E "RACECHECK SUMMARY|rc=|^\[  (PASSED|FAILED)" "$OUT/bigrace.log"
  grep -q "rc=[1-9]" "$OUT/bigrace.log" && rc_all=1
fi

if has sanitizer; then
  san_types=${TOPK_SANITIZE_DTYPES:-fp32,bf16,fp16}
  race_types=${TOPK_RACECHECK_DTYPES:-$san_types}
  san_timeout=${TOPK_SANITIZER_TIMEOUT:-300}
  {
    for t in ${san_types//,/ }; do
      (echo "== memcheck $t"
       timeout "$san_timeout" "$sanitizer" --tool memcheck --leak-check no "$bin/topk_cuda_test" \
         --gtest_filter="$(typed_filter "$t")$extra_memcheck$t:*RingPass*$t"
       echo "memcheck $t rc=$?") >"$OUT/san_memcheck_$t.log" 2>&1 &
    done
    for t in ${race_types//,/ }; do
      (echo "== racecheck $t"
       # race_skip: the heavy cases are bigrace's.
       timeout "$san_timeout" "$sanitizer" --tool racecheck "$bin/topk_cuda_test" \
         --gtest_filter="$(typed_filter "$t")-$race_skip"
       echo "racecheck $t rc=$?") >"$OUT/san_racecheck_$t.log" 2>&1 &
    done
    wait
    cat "$OUT"/san_*.log
    rm -f "$OUT"/san_*.log
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
  # TOPK_BENCH_SHAPES / TOPK_BENCH_REPS override the mode's, TOPK_BENCH_EXTRA
  # adds flags to both builds' runs (e.g. --exact=false); TOPK_BENCH_TORCH=0
  # skips torch.topk (a kernel A/B against the baseline needs only the two).
  shapes=${TOPK_BENCH_SHAPES:-$shapes}
  [ -n "${TOPK_BENCH_REPS:-}" ] && reps=(--reps="$TOPK_BENCH_REPS")
  : >"$OUT/bench.log"
  if [ -x "$bin/topk-bench-gpu-baseline" ]; then
    # The baseline parses its own argv: space-separated values.
    timeout 240 "$bin/topk-bench-gpu-baseline" --csv "$OUT/baseline.csv" --shapes "$shapes" \
      ${reps[@]+--reps ${reps[0]#--reps=}} ${TOPK_BENCH_EXTRA:-} 2>&1 | sed 's/^/baseline /' \
      >>"$OUT/bench.log"
    echo "baseline bench rc=${PIPESTATUS[0]}"
  fi
  timeout 240 "$bin/topk-bench-gpu" --csv="$OUT/ours.csv" --shapes="$shapes" "${reps[@]}" \
    ${TOPK_BENCH_EXTRA:-} >>"$OUT/bench.log" 2>&1
  echo "bench rc=$?"
  if [ "${TOPK_BENCH_TORCH:-1}" != 0 ]; then
    timeout 200 python3 bench/gpu/torch_baseline.py --csv "$OUT/torch.csv" --shapes "$shapes" \
      >>"$OUT/bench.log" 2>&1
    echo "torch rc=$?"
  fi
  baseline_arg=()
  [ -s "$OUT/baseline.csv" ] && baseline_arg=(--baseline "$OUT/baseline.csv")
  python3 bench/gpu/plot.py --ours "$OUT/ours.csv" --torch "$OUT/torch.csv" "${baseline_arg[@]}" \
    --out-csv "$OUT/h200_matrix.csv" --png "$OUT/h200_latency_vs_M.png" >>"$OUT/bench.log" 2>&1
  echo "plot rc=$?"
  grep -E "^(baseline )?(# read|(fp32 |bf16 |fp16 )?M=)|inexact|^#|^ *[0-9]+ +[0-9]+ " "$OUT/bench.log" |
    sed -E 's/  (exact|scan) [0-9.]+//g'
fi
if has dtypes; then
  shapes=$(for n in 131072 262144 524288 1048576; do for m in 512 1024 2048 4096 8192; do
    printf '%s:%s,' $m $n; done; done)
  shapes=${shapes%,}
  [ "$mode" = smoke ] && shapes=512:131072,4096:262144,2048:1048576
  reps=${TOPK_BENCH_REPS:-10}
  bt=${TOPK_BENCH_TIMEOUT:-120}
  {
    if [ -x "$bin/topk-bench-gpu-baseline" ]; then
      timeout "$bt" "$bin/topk-bench-gpu-baseline" --csv "$OUT/baseline_fp32.csv" \
        --shapes "$shapes" --reps "$reps" 2>&1 | sed 's/^/baseline /'
      echo "baseline fp32 rc=${PIPESTATUS[0]}"
    fi
    for t in fp32 bf16 fp16; do
      timeout "$bt" "$bin/topk-bench-gpu" --dtype=$t --exact=false --csv="$OUT/ours_$t.csv" \
        --shapes="$shapes" --reps="$reps"
      echo "bench $t rc=$?"
    done
    for t in fp32 bf16; do
      timeout "$bt" python3 bench/gpu/torch_baseline.py --dtype $t --reps "$reps" \
        --csv "$OUT/torch_$t.csv" --shapes "$shapes"
      echo "torch $t rc=$?"
    done
    python3 bench/gpu/dtype_table.py --fp32 "$OUT/ours_fp32.csv" --bf16 "$OUT/ours_bf16.csv" \
      --fp16 "$OUT/ours_fp16.csv" --baseline "$OUT/baseline_fp32.csv" \
      --torch-fp32 "$OUT/torch_fp32.csv" --torch-bf16 "$OUT/torch_bf16.csv" \
      --out-csv "$OUT/h200_matrix_bf16.csv"
    echo "table rc=$?"
  } >"$OUT/dtypes.log" 2>&1
  grep -E "rc=|^# |^ *[0-9]+ +[0-9]+ " "$OUT/dtypes.log" | grep -v "^baseline"
  grep -q "rc=[1-9]" "$OUT/dtypes.log" && rc_all=1
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
if has decode; then
  raw=$(mktemp -d)
  shapes=1:131072,1:262144,1:1048576,8:131072,8:262144,8:1048576,16:1048576,32:524288,64:1048576
  reps=${TOPK_DECODE_REPS:-100}
  dt=${TOPK_DECODE_TIMEOUT:-60}
  # Three runs on the same data (the bench's seeded rows), two selectors each:
  # label,label:--flags of the first selector:--flags of the second.
  runs=("c8x1,current:--cluster=1 --cluster_size=8 --cluster_ctas_per_sm=1:--alt_cluster=-1"
        "c8x2,c16x2:--cluster=1 --cluster_size=8 --cluster_ctas_per_sm=2:--alt_cluster=1 --alt_cluster_size=16 --alt_cluster_ctas_per_sm=2"
        "c16x1,planner:--cluster=1 --cluster_size=16 --cluster_ctas_per_sm=1:--alt_cluster=0 --alt_cluster_size=0 --alt_cluster_ctas_per_sm=0")
  table_args=()
  {
    for spec in "${runs[@]}"; do
      IFS=: read -r labels ours alt <<<"$spec"
      name=${labels/,/_}
      # shellcheck disable=SC2086
      timeout "$dt" "$bin/topk-bench-gpu" --shapes=$shapes --reps="$reps" --exact=false $ours $alt \
        --csv="$raw/$name.csv" --times_csv="$raw/${name}_times.csv"
      echo "decode $labels rc=$?"
      table_args+=(--run "$labels=$raw/$name.csv:$raw/${name}_times.csv")
    done
    torch_csv=${TOPK_DECODE_TORCH_CSV:-}
    if [ -z "$torch_csv" ]; then
      torch_csv=$raw/torch.csv
      timeout "$dt" python3 bench/gpu/torch_baseline.py --reps "$reps" --csv "$torch_csv" \
        --shapes "$shapes"
      echo "torch rc=$?"
    fi
    python3 bench/gpu/decode_table.py "${table_args[@]}" --torch "$torch_csv" --primary planner \
      --baseline current --out-csv "$OUT/h200_decode.csv"
    echo "table rc=$?"
  } >"$OUT/decode.log" 2>&1
  tar -C "$raw" -czf "$OUT/decode_raw.tgz" .
  grep -E "rc=|inexact|^# |^  +[0-9]+ x " "$OUT/decode.log"
  grep -q "rc=[1-9]" "$OUT/decode.log" && rc_all=1
fi
if has models; then
  raw=$(mktemp -d)
  reps=${TOPK_MODEL_REPS:-30}
  mt=${TOPK_MODEL_TIMEOUT:-150}
  declare -A model_shapes
  model_shapes[512]=$(for n in 65536 131072 262144; do for m in 1 8 64 128 512 2048; do
    printf '%s:%s,' $m $n; done; done)4096:65536
  model_shapes[1024]=${model_shapes[512]}  # DeepSeek-V4-Pro-style indexers select 1024
  model_shapes[2048]=$(for n in 32768 65536 131072; do for m in 1 8 32 64 512 2048 8192; do
    printf '%s:%s,' $m $n; done; done)8:262144,512:262144,4096:8192,4096:32768
  {
    for k in 512 1024 2048; do
      for t in fp32 bf16; do
        timeout "$mt" "$bin/topk-bench-gpu" --k=$k --dtype=$t --exact=false --reps="$reps" \
          --shapes="${model_shapes[$k]}" --csv="$raw/ours_${t}_k$k.csv"
        echo "models ours $t K=$k rc=$?"
        if [ -x "$bin/topk-bench-gpu-baseline" ]; then
          timeout "$mt" "$bin/topk-bench-gpu-baseline" --k=$k --dtype=$t --exact=false \
            --reps="$reps" --shapes="${model_shapes[$k]}" --csv="$raw/baseline_${t}_k$k.csv" |
            sed 's/^/baseline /'
          echo "models baseline $t K=$k rc=${PIPESTATUS[0]}"
        fi
        timeout "$mt" python3 bench/gpu/torch_baseline.py --k $k --dtype $t --reps "$reps" \
          --csv "$raw/torch_${t}_k$k.csv" --shapes "${model_shapes[$k]}"
        echo "models torch $t K=$k rc=$?"
      done
    done
    python3 bench/gpu/model_table.py --dir "$raw" --out-csv "$OUT/h200_model_shapes.csv"
    echo "table rc=$?"
  } >"$OUT/models.log" 2>&1
  tar -C "$raw" -czf "$OUT/models_raw.tgz" .
  grep -E "rc=|inexact|^ *(K|512|1024|2048) " "$OUT/models.log" | grep -v "^baseline"
  grep -q "rc=[1-9]" "$OUT/models.log" && rc_all=1
fi
exit $rc_all
