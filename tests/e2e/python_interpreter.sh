# Sourced by the Python client's shell tests. python_with_grpc prints the
# interpreter to run them with: Debian's /usr/bin/python3 (python3-grpcio,
# from scripts/setup-deps.sh), else python3 on PATH (often a pyenv one
# without grpcio); returns 77 (ctest's skip) and says why on stderr when it
# lacks grpcio, numpy or protobuf.   Usage: py=$(python_with_grpc) || exit 77
python_with_grpc() {
  local py=/usr/bin/python3
  [ -x "$py" ] || py=$(command -v python3)
  if ! "$py" -c "import grpc, numpy, google.protobuf" 2>/dev/null; then
    echo "SKIP: python3 lacks grpcio/numpy/protobuf (python3-grpcio python3-numpy python3-protobuf)" >&2
    return 77
  fi
  echo "$py"
}
