#!/usr/bin/env bash
# The decode shapes against the public selectors (issue "Selector V"), on the
# GPU machine, in one call: the resident route's tests, then
# the public selectors' harness peer_bench.py (carried in .carry/peers) on the decode
# shapes, warm L2 (rows just read) and cold (flushed), K = 2048 at N = 32K and
# 128K, K = 512 and 1024 at 64K and 256K, M = 1..256; the baseline library
# (.carry/gpu/lib-base/libtopk_c.so: the previous main, when packed) on the
# same shapes; and topk-bench-gpu's phase timers for the new route beside the
# route it replaces (--alt_resident=-1) on the same data.
# usage: tools/gpu-lab/decode-peers.sh [steps]   (tests,peers,base,phases,sizes; default
#   all but sizes). sizes: the route forced on every shape at each cluster size
#   (2, 4, 8, 16; the width may raise it), topk-bench-gpu, the sweep behind
#   the planner's region. spec: speculative-decoding rows (requests of 2 and 4
#   rows ending at L - n + 1 .. L, topk-bench-gpu --spec_rows) at K = 2048 and
#   512, the planner beside the route the resident one replaces. steps: the
#   resident route's step timers at the planner's cluster size and at 4, 8,
#   16 ranks. suite: the whole GPU suite (gpu-check.sh tests) beside
#   region: the route forced on every decode shape beside the planner's
#   route without it (--alt_resident=-1), K = 2048, 1024 and 512.
#   prefill: the prefill chunks and short rows (512-8192 x 128K, 4096 x 8K and
#   32K, 2048 x 1M at K = 2048; 512 and 2048 x 256K, 2048 x 128K at K = 512;
#   512 and 2048 x 256K at K = 1024), L2 flushed, ours and the peers, the
#   baseline library alone beside them (PREFILL_REPS, default 20);
#   prefill_peers.csv from bench/gpu/decode_peers_table.py, target 0.9x.
#   sanitize: memcheck of the route's cases on every type and racecheck of its
#   small case at each cluster size and CTA size (FP32), in parallel. profile: Nsight
#   Compute on the resident kernel (PROFILE_SHAPES, default "1:32768
#   32:32768"; PROFILE_K, default 2048; PROFILE_KERNEL, a name regex, default
#   Resident: ShortRow for the short-row route, with PROFILE_ARGS, default
#   --resident=1, set to --resident=0): prof_<shape>.txt (sections) and
#   prof_<shape>_sass.csv (stall samples per instruction: sass_profile.py).
#   variants: builds side by side (pack-gpu.sh TOPK_VARIANTS packs each
#   commit's topk-bench-gpu as bin/v/<name>): interleaved rounds on the decode
#   shapes at the planner's sizes, the step timers of each; variants.csv and
#   the printed ratios from bench/gpu/steps_table.py.
# Env: OUT (default /tmp/topk-out), DECODE_REPS (peer_bench replays, default 60),
#   DECODE_BASE_ALONE (1: the base step without the peers interleaved),
#   STEPS_SIZES (the steps' cluster sizes, default "0 4 8 16"), VARIANTS (the
#   builds in bin/v to time, the reference first; default all, in name
#   order), VARIANT_ROUNDS (default 2).
set -uo pipefail
steps=${1:-tests,peers,base,phases}
OUT=${OUT:-/tmp/topk-out}
mkdir -p "$OUT"
root=.carry/gpu
bin=$root/bin
peers=.carry/peers/peer_bench.py
reps=${DECODE_REPS:-60}
export PYTHONUNBUFFERED=1
rc_all=0
has() { [[ ",$steps," == *",$1,"* ]]; }
shapes_for() {  # K -> M:N list
  local widths m n list=""
  if [ "$1" = 2048 ]; then widths="32768 131072"; else widths="65536 262144"; fi
  for n in $widths; do
    for m in 1 8 32 64 128 256; do list+="$m:$n,"; done
  done
  [ "$1" = 2048 ] && list+="8:262144,"
  echo "${list%,}"
}

prefill_shapes_for() {  # K -> the prefill chunks and short rows of issue "Selector VI"
  case $1 in
    2048) echo "512:131072,2048:131072,8192:131072,4096:8192,4096:32768,2048:1048576" ;;
    512) echo "512:262144,2048:262144,2048:131072" ;;
    *) echo "512:262144,2048:262144" ;;
  esac
}

if has tests; then
  {
    "$bin/cuda_planner_test" --gtest_brief=1
    echo "cuda_planner_test rc=$?"
    "$bin/topk_cuda_key_maps_test" --gtest_brief=1
    echo "topk_cuda_key_maps_test rc=$?"
    for t in fp32 bf16 fp16; do
      (timeout "${TOPK_TEST_TIMEOUT:-300}" "$bin/topk_cuda_test" --gtest_brief=1 \
        --gtest_filter="*ResidentRouteTest*$t:*HalfPrecisionTest.EveryPattern*$t" \
        >"$OUT/tests_$t.log" 2>&1; echo "topk_cuda_test $t rc=$?" >>"$OUT/tests_$t.log") &
    done
    wait
    cat "$OUT"/tests_fp32.log "$OUT"/tests_bf16.log "$OUT"/tests_fp16.log
    rm -f "$OUT"/tests_*.log
  } >"$OUT/resident_tests.log" 2>&1
  grep -E "^\[  (PASSED|FAILED)  \]|rc=|FAILED" "$OUT/resident_tests.log" | tail -30
  grep -q "rc=[1-9]" "$OUT/resident_tests.log" && rc_all=1
fi

run_peers() {  # lib tag skip [shapes_fn] [l2 states] [reps]
  local k l2
  for k in 2048 512 1024; do
    for l2 in ${5:-warm flush}; do
      python3 "$peers" --ours "$1" --k "$k" --l2 "$l2" --reps "${6:-$reps}" \
        --shapes "$(${4:-shapes_for} $k)" --csv "$OUT/$2_k${k}_${l2}.csv" ${3:+--skip "$3"} \
        >"$OUT/$2_k${k}_${l2}.log" 2>&1
      echo "$2 K=$k $l2 rc=$?"
    done
  done
}
if has peers; then
  run_peers "$root/lib/libtopk_c.so" peers ""
  for f in "$OUT"/peers_k2048_*.log; do echo "== $f"; tail -22 "$f"; done
fi
if has base && [ -f "$root/lib-base/libtopk_c.so" ]; then
  # The previous main among the same peers as ours: timed alone, a library's
  # medians come out tighter and lower than interleaved with other kernels,
  # so its column would not compare with ours (DECODE_BASE_ALONE=1: alone,
  # faster). The peers' medians of this run show the drift between the two.
  LD_LIBRARY_PATH=$root/lib run_peers "$root/lib-base/libtopk_c.so" base \
    "$([ "${DECODE_BASE_ALONE:-0}" = 1 ] && echo hpcops,flashinfer,deepselect,vllm,torch)"
fi
if has prefill; then
  # The prefill chunks and short rows (issue "Selector VI"), L2 flushed:
  # ours and the peers, and the previous main's library alone on the same
  # shapes when packed; prefill_peers.csv against 0.9x the fastest peer.
  run_peers "$root/lib/libtopk_c.so" prefill "" prefill_shapes_for flush "${PREFILL_REPS:-20}"
  for f in "$OUT"/prefill_k*_flush.log; do echo "== $f"; tail -12 "$f"; done
  if [ -f "$root/lib-base/libtopk_c.so" ]; then
    LD_LIBRARY_PATH=$root/lib run_peers "$root/lib-base/libtopk_c.so" prefillbase \
      hpcops,flashinfer,deepselect,vllm,torch prefill_shapes_for flush "${PREFILL_REPS:-20}"
  fi
  python3 bench/gpu/decode_peers_table.py --dir "$OUT" --prefix prefill --base-prefix prefillbase \
    --target 0.9 --out-csv "$OUT/prefill_peers.csv"
fi
if has phases; then
  for k in 2048 512; do
    "$bin/topk-bench-gpu" --k "$k" --shapes "$(shapes_for $k)" --reps 30 --alt_resident=-1 \
      --csv "$OUT/phases_k$k.csv" >"$OUT/phases_k$k.log" 2>&1
    echo "phases K=$k rc=$?"
    tail -30 "$OUT/phases_k$k.log"
  done
fi
if has region; then
  # The route forced on every decode shape beside the route the planner
  # takes without it, same rows: the data behind kResidentRegion.
  for k in 2048 1024 512; do
    "$bin/topk-bench-gpu" --k "$k" --shapes "$(shapes_for $k)" --reps 30 --resident=1 \
      --alt_resident=-1 --csv "$OUT/region_k$k.csv" >"$OUT/region_k$k.log" 2>&1
    echo "region K=$k rc=$?"
  done
fi
if has sizes; then
  for k in 2048 512; do
    for size in 2 4 8 16; do
      "$bin/topk-bench-gpu" --k "$k" --shapes "$(shapes_for $k)" --reps 30 --resident=1 \
        --resident_cluster_size="$size" --csv "$OUT/sizes_k${k}_c$size.csv" \
        >"$OUT/sizes_k${k}_c$size.log" 2>&1
      echo "sizes K=$k cluster=$size rc=$?"
    done
  done
fi
if has steps; then
  # The resident route's step timers (load, its barrier, exchange, boundary,
  # gather, its barrier; bench "steps" lines) at the planner's cluster size
  # and at 4, 8 and 16 ranks, on the shapes the route serves (another
  # build beside this one: the variants step).
  for size in ${STEPS_SIZES:-0 4 8 16}; do
    for k in 2048 1024 512; do
      if [ "$k" = 2048 ]; then sh="1:32768,8:32768,32:32768,1:131072,8:131072"; else sh="1:65536,8:65536"; fi
      "$bin/topk-bench-gpu" --k "$k" --shapes "$sh" --reps 40 --resident=1 \
        --resident_cluster_size="$size" --csv "$OUT/steps_k${k}_c$size.csv" \
        >"$OUT/steps_k${k}_c$size.log" 2>&1
      echo "steps K=$k cluster=$size rc=$?"
      grep -E "^fp32 M=|steps M=" "$OUT/steps_k${k}_c$size.log" | sed 's/  */ /g'
    done
  done
fi
if has variants; then
  names=${VARIANTS:-$(ls "$bin/v" 2>/dev/null | tr '\n' ' ')}
  for round in $(seq "${VARIANT_ROUNDS:-2}"); do
    for v in $names; do
      for k in 2048 512; do
        sh="1:65536,8:65536,64:65536,128:65536,1:262144,8:262144,64:262144"
        [ "$k" = 2048 ] && sh="1:32768,8:32768,32:32768,64:32768,128:32768,256:32768,1:131072,8:131072,32:131072,64:131072"
        LD_LIBRARY_PATH=$root/lib "$bin/v/$v" --k "$k" --shapes "$sh" --reps 30 --resident=1 \
          --exact=false --csv "$OUT/var_${v}_k${k}_r$round.csv" >"$OUT/var_${v}_k${k}_r$round.log" 2>&1
        echo "variant $v K=$k round $round rc=$?"
      done
    done
  done
  python3 bench/gpu/steps_table.py --dir "$OUT" --builds "$(echo $names | tr ' ' ',')" \
    --out-csv "$OUT/variants.csv"
fi
if has spec; then
  for k in 2048 512; do
    for n in 2 4; do
      "$bin/topk-bench-gpu" --k "$k" --shapes "$(shapes_for $k)" --reps 30 --spec_rows="$n" \
        --alt_resident=-1 --csv "$OUT/spec_k${k}_n$n.csv" >"$OUT/spec_k${k}_n$n.log" 2>&1
      echo "spec K=$k rows per request=$n rc=$?"
    done
  done
fi
if has profile; then
  # Where the resident (or PROFILE_KERNEL's) kernel's warps stall, per SASS instruction (Nsight
  # Compute's PC sampling; the clocks left alone), and the kernel's
  # throughput and stall sections; bench/gpu/sass_profile.py reads the CSV.
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for sh in ${PROFILE_SHAPES:-1:32768 32:32768}; do
    tag=prof_$(echo "$sh" | tr ':' 'x')
    timeout 150 "$ncu" --clock-control none --kernel-name "regex:${PROFILE_KERNEL:-Resident}" --launch-skip 3 \
      --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters \
      -o "$OUT/$tag" -f "$bin/topk-bench-gpu" --k "${PROFILE_K:-2048}" --shapes "$sh" --reps 5 \
      ${PROFILE_ARGS:---resident=1} --exact=false --csv "$OUT/$tag.bench.csv" >"$OUT/$tag.log" 2>&1
    echo "profile $sh rc=$?"
    "$ncu" -i "$OUT/$tag.ncu-rep" --page details --print-details all >"$OUT/$tag.txt" 2>&1
    "$ncu" -i "$OUT/$tag.ncu-rep" --page source --csv --print-source sass >"$OUT/${tag}_sass.csv" 2>&1
    rm -f "$OUT/$tag.ncu-rep"
  done
fi
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san_timeout=${TOPK_SANITIZER_TIMEOUT:-240}
if has sanitize; then
  memcheck_filter='*ResidentRouteTest.SanitizerSmallRows*:*ResidentRouteTest.InfinityFloods*'
  memcheck_filter+=':*ResidentRouteTest.BoundaryInsideOneCoarseBin*'
  for t in fp32 bf16 fp16; do
    (timeout "$san_timeout" "$sanitizer" --tool memcheck "$bin/topk_cuda_test" --gtest_brief=1 \
       --gtest_filter="$(echo "$memcheck_filter" | sed "s/:/$t:/g; s/\$/$t/")" \
       >"$OUT/memcheck_$t.log" 2>&1; echo "memcheck $t rc=$?" >>"$OUT/memcheck_$t.log") &
  done
  for size in 1 4 16; do
    for threads in 512 1024; do
      (timeout "$san_timeout" "$sanitizer" --tool racecheck "$bin/topk_cuda_test" --gtest_brief=1 \
         --gtest_filter="*ResidentRouteTest.SanitizerSmallRows/Ranks${size}_Threads${threads}_fp32" \
         >"$OUT/racecheck_${size}_$threads.log" 2>&1
       echo "racecheck ranks $size threads $threads rc=$?" >>"$OUT/racecheck_${size}_$threads.log") &
    done
  done
fi
if has suite; then
  TOPK_TEST_TIMEOUT=${TOPK_SUITE_TIMEOUT:-300} bash tools/gpu-lab/gpu-check.sh full tests >"$OUT/suite.log" 2>&1
  echo "suite rc=$?"
  grep -E "^\[  (PASSED|FAILED)  \]|rc=|FAILED  \]" "$OUT/suite.log" | tail -20
fi
wait
if has sanitize; then
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT"/memcheck_*.log "$OUT"/racecheck_*.log
  grep -qE "rc=[1-9]" "$OUT"/memcheck_*.log "$OUT"/racecheck_*.log && rc_all=1
fi
exit $rc_all
