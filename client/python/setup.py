"""Builds the topk.v1 stubs into topk_client/_proto before packaging, from
the repository's proto/ (the package metadata is in pyproject.toml)."""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "..", "proto")
OUT = os.path.join(HERE, "topk_client", "_proto")


class BuildWithStubs(build_py):
    def run(self):
        if not os.path.exists(os.path.join(OUT, "topk", "v1", "topk_pb2.py")):
            os.makedirs(OUT, exist_ok=True)
            subprocess.check_call([sys.executable, "-m", "grpc_tools.protoc",
                                   f"--proto_path={PROTO_ROOT}", f"--python_out={OUT}",
                                   f"--grpc_python_out={OUT}",
                                   os.path.join(PROTO_ROOT, "topk", "v1", "topk.proto")])
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
