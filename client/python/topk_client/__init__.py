"""Python client of topk-server (topk.v1.TopK), for serving frontends.

    from topk_client import TopKClient
    client = TopKClient("127.0.0.1:50051")
    indices = client.select([row0, row1], k=2048).indices   # numpy int32 (M, K)
    indices = client.select(padded, k=2048, lengths=lengths).indices   # padded (M, N) rows
    indices = client.select(rows16, k=2048).indices   # float16 / torch.bfloat16: 2 bytes each

Several replicas: TopKClient("ipv4:10.0.0.1:50051,10.0.0.2:50051",
load_balancing_policy="round_robin"). asyncio: AsyncTopKClient (topk_client.aio),
the same calls awaited. TLS and mutual TLS: tls=TlsOptions.from_files(roots,
certificate, key) (topk_client.tls), on every client and either path.

The generated stubs live in topk_client/_proto and topk_client/_health_proto
(made by `pip install client/python`, by client/python/generate.sh next to
these sources, or by the CMake build into build/python/topk_client).

In process, on this process's GPU and CUDA stream (libtopk_c.so; no server):

    from topk_client import InProcessSelector
    indices = InProcessSelector().select(scores, lengths, k=2048)   # CUDA tensors

TopKClient.select and every ZeroCopyClient call go through the native core
(libtopk_client_c.so, the C++ client by ctypes) when the package finds it,
else through grpcio: same arguments and errors (topk_client._native).

Zero-copy (rows and answers by reference, the server on the same host):

    from topk_client import ZeroCopyClient
    with ZeroCopyClient("unix:/run/topk.sock") as topk:
        indices = topk.select(scores, lengths, k=2048)   # scores: (M, N) float32 CUDA tensor
"""

# The in-process path needs torch (and a GPU), not grpc: importable without it.
from topk_client._checks import RegionError  # noqa: F401
from topk_client.inprocess import InProcessSelector  # noqa: F401
from topk_client.tls import TlsOptions  # noqa: F401

_RPC_NAMES = ("TopKClient", "AsyncTopKClient", "SelectResult", "pack_rows", "channel_options",
              "ZeroCopyClient", "RegionSession", "SelectError", "CallError", "SelectPipeline",
              "bf16_to_float", "float_to_bf16", "Channel", "ChannelError")
try:
    from topk_client.aio import AsyncTopKClient  # noqa: F401
    from topk_client.client import (  # noqa: F401
        SelectResult, TopKClient, channel_options, pack_rows)
    from topk_client.dtypes import bf16_to_float, float_to_bf16  # noqa: F401
    from topk_client._errors import CallError  # noqa: F401
    from topk_client.regions import (  # noqa: F401
        RegionSession, SelectError, SelectPipeline, ZeroCopyClient)
    from topk_client.channel import Channel, ChannelError  # noqa: F401
except ImportError as _missing:  # grpcio, protobuf, numpy or the generated stubs
    _MISSING = _missing
else:
    _MISSING = None

if _MISSING is not None:
    def __getattr__(name):
        # What the RPC clients need, said at the first use of one of them.
        if name in _RPC_NAMES:
            raise ImportError(
                f"topk_client.{name} is unavailable ({_MISSING}): the RPC clients need "
                "grpcio>=1.51, protobuf>=4.21, numpy>=1.21 and the generated stubs; "
                "`pip install client/python` brings them all from PyPI; offline, "
                "use Debian's /usr/bin/python3 with python3-grpcio python3-protobuf "
                "python3-numpy (scripts/setup-deps.sh), e.g. in a venv made with "
                "--system-site-packages")
        raise AttributeError(f"module 'topk_client' has no attribute '{name}'")

__all__ = list(_RPC_NAMES) + ["RegionError", "InProcessSelector", "TlsOptions"]
