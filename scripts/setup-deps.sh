#!/usr/bin/env bash
# Installs the build dependencies from Debian's packages when any is missing.
# Idempotent: does nothing (and needs no network) when everything is present.
set -euo pipefail
packages=(
  build-essential cmake ccache pkg-config patchelf
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3
  prometheus-cpp-dev python3-grpcio python3-numpy python3-protobuf
  # The Python client in a venv of Debian's python3 (README): pip builds it offline.
  python3-venv python3-setuptools python3-wheel
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup-deps: installing ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
