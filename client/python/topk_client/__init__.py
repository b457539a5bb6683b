"""Python client of topk-server (topk.v1.TopK), for serving frontends.

    from topk_client import TopKClient
    client = TopKClient("127.0.0.1:50051")
    indices = client.select([row0, row1], k=2048).indices   # numpy int32 (M, K)

The generated stubs live in topk_client/_proto (made by the CMake build into
build/python/topk_client, or by client/python/generate.sh next to these
sources, or by `pip install client/python`).

Zero-copy (rows and answers by reference, the server on the same host):

    from topk_client import ZeroCopyClient
    with ZeroCopyClient("unix:/run/topk.sock") as topk:
        indices = topk.select(scores, lengths, k=2048)   # scores: (M, N) float32 CUDA tensor
"""

from topk_client.client import SelectResult, TopKClient, pack_rows  # noqa: F401
from topk_client.regions import RegionError, RegionSession, ZeroCopyClient  # noqa: F401

__all__ = ["TopKClient", "SelectResult", "pack_rows", "ZeroCopyClient", "RegionSession",
           "RegionError"]
