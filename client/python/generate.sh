#!/usr/bin/env bash
# Generates the Python stubs next to the sources for use without a CMake
# build: topk.v1 into topk_client/_proto, grpc.health.v1 into
# topk_client/_health_proto. protoc + grpc_python_plugin (Debian:
# protobuf-compiler, protobuf-compiler-grpc), or grpc_tools when installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
proto_dir=$here/../../proto
out=$here/topk_client/_proto
health_out=$here/topk_client/_health_proto
mkdir -p "$out" "$health_out"
if command -v grpc_python_plugin >/dev/null; then
  protoc --proto_path="$proto_dir" --python_out="$out" --grpc_python_out="$out" \
    --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
    "$proto_dir/topk/v1/topk.proto"
  protoc --proto_path="$proto_dir" --python_out="$health_out" \
    "$proto_dir/grpc/health/v1/health.proto"
else
  python3 -m grpc_tools.protoc --proto_path="$proto_dir" --python_out="$out" \
    --grpc_python_out="$out" "$proto_dir/topk/v1/topk.proto"
  python3 -m grpc_tools.protoc --proto_path="$proto_dir" --python_out="$health_out" \
    "$proto_dir/grpc/health/v1/health.proto"
fi
echo "stubs in $out and $health_out"
