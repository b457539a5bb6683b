#!/usr/bin/env bash
# The sweep behind the planner's dense-sampling cells (kernels/src/planner/
# route_policies.h, kDenseSampling): the model shapes at K = 512 and 2048 and
# three long-row shapes of the matrix, each timed with the sample stride
# pinned to 64 and to 32 in its own topk-bench-gpu process on the same
# generated data (same shape lists, same seeds), every timed output verified.
# Pinning the stride keeps the planner's rules (not its route table), so both
# runs take the same routes. bench/gpu/stride_table.py merges the CSVs.
# usage: stride-sweep.sh BIN OUT   (BIN: the folder holding topk-bench-gpu)
set -uo pipefail
bin=$1 out=$2
reps=${TOPK_SWEEP_REPS:-15}
mkdir -p "$out"
k512=1:65536,8:65536,64:65536,128:65536,512:65536,2048:65536,4096:65536,1:131072,8:131072
k512+=,64:131072,128:131072,512:131072,2048:131072,1:262144,8:262144,64:262144,128:262144
k512+=,512:262144,2048:262144
k2048=4096:8192,1:32768,8:32768,32:32768,64:32768,512:32768,2048:32768,4096:32768,8192:32768
k2048+=,1:65536,8:65536,32:65536,64:65536,512:65536,2048:65536,8192:65536,1:131072,8:131072
k2048+=,32:131072,64:131072,512:131072,2048:131072,8192:131072,8:262144,512:262144
long=512:524288,2048:262144,2048:1048576
rc=0
for stride in 64 32; do
  for set in "k512 512 $k512" "k2048 2048 $k2048" "long 2048 $long"; do
    read -r name k shapes <<<"$set"
    "$bin/topk-bench-gpu" --k="$k" --shapes="$shapes" --reps="$reps" --exact=false \
      --stride="$stride" --csv="$out/${name}_s$stride.csv" >"$out/${name}_s$stride.log" 2>&1 ||
      { echo "FAIL $name stride $stride"; rc=1; }
  done
done
python3 "$(dirname "$0")/../../bench/gpu/stride_table.py" "$out" --csv "$out/h200_stride_sweep.csv"
exit $rc
