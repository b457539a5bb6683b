"""Builds the stubs before packaging, from the repository's proto/: topk.v1
into topk_client/_proto, grpc.health.v1 into topk_client/_health_proto (the
package metadata is in pyproject.toml). When shared libraries were copied
into topk_client/ first (scripts/build-wheel.sh), the wheel is tagged for
this platform (py3-none-<platform>: any Python 3, this OS and processor),
since it carries machine code; without them it stays pure Python."""
import glob
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


def platform_wheel():
    """bdist_wheel for a package that carries shared libraries but no Python
    extension: any Python 3, this platform."""
    try:
        from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", super().get_tag()[2]

    return PlatformWheel


commands = {"build_py": BuildWithStubs}
if glob.glob(os.path.join(HERE, "topk_client", "lib*.so*")):
    commands["bdist_wheel"] = platform_wheel()
setup(cmdclass=commands)
