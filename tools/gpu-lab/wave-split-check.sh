#!/usr/bin/env bash
# Issue 10 item 4 (the M = 512 waves) in one device call, from the
# relocatable build of pack-gpu.sh (TOPK_GPU_DIST, default .carry/gpu; the
# baseline build's bench as bin/topk-bench-gpu-baseline). Logs and CSVs go to
# $OUT.
#   bench: the M = 512 and M = 1024 columns (N 128K..1M, K = 2048, FP32 causal
#          indexer rows): the planner's choice beside the wave-breaking split
#          forced (kv_split_force 2; then 4 on M = 512) on the same data in one
#          process, each with one traced launch (row starts and ends); two large
#          shapes; then the baseline binary on the same shapes and data.
#   tests: the suites that reach the changed code on FP32, BF16 and FP16, both
#          variants, memcheck on the small cases (three types) and racecheck
#          on the trace test (FP32), all in parallel after the bench
#          (TOPK_CHECK_TIMEOUT seconds each).
set -uo pipefail
OUT=${OUT:-/tmp/topk-out}
mkdir -p "$OUT"
bin=${TOPK_GPU_DIST:-.carry/gpu}/bin
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
reps=${TOPK_BENCH_REPS:-5}
limit=${TOPK_CHECK_TIMEOUT:-60}
m512=512:131072,512:262144,512:524288,512:1048576
m1024=1024:131072,1024:262144,1024:524288,1024:1048576
large=4096:262144,8192:1048576
common=(--reps="$reps" --exact=false --trace --trace_csv="$OUT/trace.csv")
{
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv
  "$bin/topk-bench-gpu" --shapes=$m512,$m1024 "${common[@]}" --alt_kv_split_force=2 \
    --csv="$OUT/split2.csv"
  echo "split2 rc=$?"
  "$bin/topk-bench-gpu" --shapes=$m512 "${common[@]}" --alt_kv_split_force=4 \
    --csv="$OUT/split4.csv"
  echo "split4 rc=$?"
  "$bin/topk-bench-gpu" --shapes=$large --reps="$reps" --exact=false --csv="$OUT/large.csv"
  echo "large rc=$?"
  "$bin/topk-bench-gpu-baseline" --shapes=$m512,$m1024,$large --reps="$reps" --exact=false \
    --csv="$OUT/baseline.csv"
  echo "baseline rc=$?"
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv
} >"$OUT/bench.log" 2>&1
grep -E "M=|rc=" "$OUT/bench.log"

tests='*WaveSplitTest.*:*KvSplit*:*CudaSelectorTest.WideRows*:*CudaSelectorTest.ManyRowsPerCta*'
tests+=':*CudaSelectorTest.EveryGenerator*:*RecoveryPathTest.DefaultView*'
tests+=':*GraphRunnerTest.ReplaysRunAhead*'
small='*WaveSplitTest.RowTrace*:*KvSplitBandTest.SanitizerSmall*:*CudaSelectorTest.SanitizerSmall*'
typed() { echo "$1" | sed "s/:/$2:/g; s/\$/$2/"; }
{
  "$bin/cuda_planner_test" --gtest_brief=1
  echo "cuda_planner_test rc=$?"
  for t in fp32 bf16 fp16; do
    (timeout "$limit" "$bin/topk_cuda_test" --gtest_brief=1 --gtest_filter="$(typed "$tests" $t)" \
      >"$OUT/t_$t.log" 2>&1; echo "topk_cuda_test $t rc=$?" >>"$OUT/t_$t.log") &
    (timeout "$limit" "$san" --tool memcheck --leak-check no "$bin/topk_cuda_test" \
      --gtest_brief=1 --gtest_filter="$(typed "$small" $t)" >"$OUT/m_$t.log" 2>&1
     echo "memcheck $t rc=$?" >>"$OUT/m_$t.log") &
  done
  (timeout "$limit" "$san" --tool racecheck "$bin/topk_cuda_test" --gtest_brief=1 \
    --gtest_filter="*WaveSplitTest.RowTrace*fp32" >"$OUT/r_fp32.log" 2>&1
   echo "racecheck fp32 rc=$?" >>"$OUT/r_fp32.log") &
  wait
  cat "$OUT"/t_*.log "$OUT"/m_*.log "$OUT"/r_*.log
  rm -f "$OUT"/t_*.log "$OUT"/m_*.log "$OUT"/r_*.log
} >"$OUT/tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED)  \]|FAILED|rc=|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/tests.log"
