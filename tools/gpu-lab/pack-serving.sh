#!/usr/bin/env bash
# Builds the CUDA-enabled server, its tools, the serving suites and the Python
# client here and packs them into .carry/serving/ (bin/, lib/ with rpath
# $ORIGIN/../lib, python/, proto/, python-tests/, serving-h200.sh and its
# steps in serving/) for one device call, carried as .carry/serving-tgz:
# `tar -xzf .carry/serving-tgz/serving.tgz -C /tmp &&
# bash /tmp/serving/serving-h200.sh /tmp/serving $OUT [steps]`.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${TOPK_BUILD_DIR:-build-gpu-lab-server}
dest=.carry/serving
cmake -S . -B "$build" -DTOPK_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DTOPK_BUILD_TESTS=ON \
  -DTOPK_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES="${TOPK_CUDA_ARCH:-90}" >/dev/null
targets=(topk-server topk-cli topk-loadgen region_call_bench region_cuda_test region_session_child
         region_pipeline_test region_sigbus_test region_select_test region_fault_test
         coalescing_test half_precision_test staging_bench)
present=()
known=$(cmake --build "$build" --target help)
for t in "${targets[@]}"; do
  # Only targets this tree defines (suites come and go with the branches).
  if grep -qx "\.\.\. $t" <<<"$known"; then present+=("$t"); fi
done
# libtopk_c.so: the in-process provider of the frontend benchmark (bench/frontend).
cmake --build "$build" -j "${TOPK_JOBS:-2}" --target "${present[@]}" topk_python_client topk_c
rm -rf "$dest"
bins=()
for t in "${present[@]}"; do
  path=$(find "$build" -type f -name "$t" -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
  if [ -n "$path" ]; then bins+=("$path"); else echo "note: $t was not built" >&2; fi
done
# TOPK_EXTRA_BINS: more executables to pack as they are named (for example
# another build's topk-server renamed topk-server-main, to run beside these).
read -r -a extra <<<"${TOPK_EXTRA_BINS:-}"
bash deploy/make-relocatable.sh "$dest" "${bins[@]}" "${extra[@]}" \
  --lib "$(find "$build" -name libtopk_c.so -not -path '*/CMakeFiles/*' | head -1)"
strip "$dest"/bin/* 2>/dev/null || true
mkdir -p "$dest/python" "$dest/python-tests" "$dest/proto"
cp -r "$build/python/topk_client" "$dest/python/"
cp client/python/tests/*.py "$dest/python-tests/"
cp -r proto/topk "$dest/proto/"
cp tools/gpu-lab/serving-h200.sh tools/gpu-lab/channels-h200.sh "$dest/"
# The fault probe's faulting client (a CUDA program of its own, built here).
mkdir -p "$dest/probes" && cp tools/gpu-lab/probes/mps_client_fault.sh "$dest/probes/"
nvcc -O2 -arch=sm_"${TOPK_CUDA_ARCH:-90}" -o "$dest/bin/client_fault" \
  tools/gpu-lab/probes/client_fault.cu
mkdir -p "$dest/frontend" && cp bench/frontend/* "$dest/frontend/" 2>/dev/null || true
mkdir -p "$dest/serving"
cp tools/gpu-lab/serving/*.sh "$dest/serving/"
du -sh "$dest"
# The in-process suites each link the kernels: the folder outgrows one call's
# carry, so it travels compressed (unpack: tar -xzf .carry/serving-tgz/serving.tgz).
mkdir -p .carry/serving-tgz
tar -C .carry -czf .carry/serving-tgz/serving.tgz serving
du -sh .carry/serving-tgz
