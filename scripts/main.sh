#!/usr/bin/env bash
# The main job (interim, until the server lands): build, then select on
# generated indexer-like rows with the CPU selector, verify every output and
# print a table (rows, N, K, ms, rows/s, exact). Extra arguments go to the demo
# (e.g. --k=512 --threads=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build_dir=${TOPK_BUILD_DIR:-build}
"$build_dir/bench/cpu/topk_demo" "$@"
