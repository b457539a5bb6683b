#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every suite.
# GPU suites skip (with a reason) when no device is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build_dir=${TOPK_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "${TOPK_JOBS:-$(nproc)}"
