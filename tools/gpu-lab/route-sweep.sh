#!/usr/bin/env bash
# The route sweep behind the planner's K table (kernels/src/planner/
# route_table.h): every route and variant the selector can be forced onto,
# timed on the model shapes at one K, each configuration in its own
# topk-bench-gpu process on the same generated data (same seeds), every timed
# output verified. The per-configuration CSVs (median and p99 per shape) go
# to OUT as sweep_<dtype>_k<K>_<config>.csv; bench/gpu/route_sweep.py turns
# them into the best configuration per shape.
# usage: route-sweep.sh BIN OUT K [dtype]
#   BIN: the folder holding topk-bench-gpu; TOPK_SWEEP_REPS (default 15),
#   TOPK_SWEEP_CONFIGS: a comma list of the names below (default all).
set -uo pipefail
bin=$1 out=$2 k=$3 dtype=${4:-fp32}
reps=${TOPK_SWEEP_REPS:-15}
mkdir -p "$out"
# The model shapes of K (bench/NOTES.md, "Selector IV"): K <= 1024 the
# compressed indexers' (N 64K..256K), above it the uncompressed ones' (N 32K..
# 128K, and the 8K / 32K short-row buckets and 256K of the matrix).
model_shapes() {
  if [ "$k" -le 1024 ]; then
    for n in 65536 131072 262144; do for m in 1 8 64 128 512 2048; do echo "$m:$n"; done; done
    echo 4096:65536
  else
    for n in 32768 65536 131072; do for m in 1 8 32 64 512 2048 8192; do echo "$m:$n"; done; done
    printf '%s\n' 8:262144 512:262144 4096:8192 4096:32768
  fi
}
shapes_of() {  # the model shapes restricted to M <= $1 and N >= $2
  local list=
  for s in $(model_shapes); do
    [ "${s%:*}" -le "$1" ] && [ "${s#*:}" -ge "$2" ] && list+="$s,"
  done
  echo "${list%,}"
}
# name|flags|max M|min N
configs=(
  "planner||1000000|0"
  "rules|--route_table=false|1000000|0"
  "persist512|--nokv_split --cluster=-1 --short_rows=0 --ctas_per_sm=2|1000000|0"
  "persist256|--nokv_split --cluster=-1 --short_rows=0 --ctas_per_sm=4|1000000|0"
  "persist512r|--nokv_split --cluster=-1 --short_rows=0 --ctas_per_sm=2 --admit_ring=1|1000000|0"
  "persist256r|--nokv_split --cluster=-1 --short_rows=0 --ctas_per_sm=4 --admit_ring=1|1000000|0"
  "shortrow|--short_rows=1048576 --cluster=-1|1000000|0"
  "kv2|--kv_split_force=2 --cluster=-1 --short_rows=0|512|65536"
  "kv4|--kv_split_force=4 --cluster=-1 --short_rows=0|512|65536"
  "kv8|--kv_split_force=8 --cluster=-1 --short_rows=0|512|65536"
  "cl8x1|--cluster=1 --cluster_size=8 --cluster_ctas_per_sm=1 --short_rows=0|128|65536"
  "cl8x2|--cluster=1 --cluster_size=8 --cluster_ctas_per_sm=2 --short_rows=0|128|65536"
  "cl16x1|--cluster=1 --cluster_size=16 --cluster_ctas_per_sm=1 --short_rows=0|8|131072"
)
want=",${TOPK_SWEEP_CONFIGS:-all},"
for entry in "${configs[@]}"; do
  IFS='|' read -r name flags max_m min_n <<<"$entry"
  [[ $want == ",all," || $want == *",$name,"* ]] || continue
  shapes=$(shapes_of "$max_m" "$min_n")
  [ -n "$shapes" ] || continue
  t0=$SECONDS
  # shellcheck disable=SC2086  # flags are words
  timeout "${TOPK_SWEEP_TIMEOUT:-150}" "$bin/topk-bench-gpu" --k="$k" --dtype="$dtype" --shapes="$shapes" --reps="$reps" \
    --exact=false --csv="$out/sweep_${dtype}_k${k}_$name.csv" \
    $flags >"$out/sweep_${dtype}_k${k}_$name.log" 2>&1
  echo "sweep $dtype K=$k $name rc=$? $((SECONDS - t0)) s"
done
