#!/usr/bin/env bash
# Generates the Python stubs next to the sources (topk_client/_proto) for use
# without a CMake build: protoc + grpc_python_plugin (Debian:
# protobuf-compiler, protobuf-compiler-grpc), or grpc_tools when installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
proto_dir=$here/../../proto
out=$here/topk_client/_proto
mkdir -p "$out"
if command -v grpc_python_plugin >/dev/null; then
  protoc --proto_path="$proto_dir" --python_out="$out" --grpc_python_out="$out" \
    --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
    "$proto_dir/topk/v1/topk.proto"
else
  python3 -m grpc_tools.protoc --proto_path="$proto_dir" --python_out="$out" \
    --grpc_python_out="$out" "$proto_dir/topk/v1/topk.proto"
fi
echo "stubs in $out"
