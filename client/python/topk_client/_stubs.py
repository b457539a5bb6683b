"""The generated protobuf and gRPC modules the client speaks with.

topk.v1 lives in topk_client/_proto; its modules import each other as
`topk.v1.*`, so that root goes on sys.path (it holds no `grpc` package).

grpc.health.v1 is taken from grpcio-health-checking (`grpc_health.v1`) when it
is installed, since that is the one copy of those messages other libraries of
the process use. Otherwise from our own stubs of the same health.proto in
topk_client/_health_proto, loaded by file path: on sys.path that folder's
`grpc` package would hide grpcio's.
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PROTO_ROOT = os.path.join(_HERE, "_proto")
_HEALTH_PB2 = os.path.join(_HERE, "_health_proto", "grpc", "health", "v1", "health_pb2.py")

if _PROTO_ROOT not in sys.path:
    sys.path.insert(0, _PROTO_ROOT)
try:
    from topk.v1 import topk_pb2, topk_pb2_grpc  # noqa: E402,F401
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "topk_client: generated stubs missing; `pip install client/python`, build with CMake "
        "(build/python/topk_client) or run client/python/generate.sh") from e


_health_pb2 = None


def health_pb2():
    """The grpc.health.v1 messages module, loaded on first use (a package
    assembled without them still selects; only health checks need them)."""
    global _health_pb2
    if _health_pb2 is None:
        _health_pb2 = _load_health_pb2()
    return _health_pb2


def _load_health_pb2():
    try:
        from grpc_health.v1 import health_pb2
        return health_pb2
    except ImportError:
        pass
    if not os.path.exists(_HEALTH_PB2):
        raise ImportError(
            "topk_client: no grpc.health.v1 stubs; install grpcio-health-checking, or run "
            "client/python/generate.sh (pip install client/python makes them)")
    spec = importlib.util.spec_from_file_location("topk_client._health_pb2", _HEALTH_PB2)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

