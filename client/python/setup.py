"""Builds the stubs before packaging, from the repository's proto/: topk.v1
into topk_client/_proto, grpc.health.v1 into topk_client/_health_proto (the
package metadata is in pyproject.toml)."""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "..", "proto")
OUT = os.path.join(HERE, "topk_client", "_proto")
HEALTH_OUT = os.path.join(HERE, "topk_client", "_health_proto")


def protoc(*args):
    """grpcio-tools' protoc (what pyproject.toml's build requirements bring),
    else the system's protoc with grpc_python_plugin (Debian:
    protobuf-compiler, protobuf-compiler-grpc) for a build without
    isolation and without PyPI."""
    try:
        import grpc_tools  # noqa: F401
    except ImportError:
        plugin = shutil.which("grpc_python_plugin")
        if shutil.which("protoc") is None or plugin is None:
            raise SystemExit(
                "topk-client: generating the stubs needs grpcio-tools (pip fetches it unless "
                "--no-build-isolation) or protoc + grpc_python_plugin (Debian: "
                "protobuf-compiler protobuf-compiler-grpc), or run client/python/generate.sh")
        subprocess.check_call(["protoc", f"--proto_path={PROTO_ROOT}",
                               f"--plugin=protoc-gen-grpc_python={plugin}", *args])
        return
    subprocess.check_call([sys.executable, "-m", "grpc_tools.protoc",
                           f"--proto_path={PROTO_ROOT}", *args])


class BuildWithStubs(build_py):
    def run(self):
        if not os.path.exists(os.path.join(OUT, "topk", "v1", "topk_pb2.py")):
            os.makedirs(OUT, exist_ok=True)
            protoc(f"--python_out={OUT}", f"--grpc_python_out={OUT}",
                   os.path.join(PROTO_ROOT, "topk", "v1", "topk.proto"))
        if not os.path.exists(os.path.join(HEALTH_OUT, "grpc", "health", "v1", "health_pb2.py")):
            os.makedirs(HEALTH_OUT, exist_ok=True)
            protoc(f"--python_out={HEALTH_OUT}",
                   os.path.join(PROTO_ROOT, "grpc", "health", "v1", "health.proto"))
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
