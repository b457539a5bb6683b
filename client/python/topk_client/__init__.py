"""Python client of topk-server (topk.v1.TopK), for serving frontends.

    from topk_client import TopKClient
    client = TopKClient("127.0.0.1:50051")
    indices = client.select([row0, row1], k=2048).indices   # numpy int32 (M, K)

The generated stubs live in topk_client/_proto (made by the CMake build into
build/python/topk_client, or by client/python/generate.sh next to these
sources). CUDA tensors by IPC handle are a later issue (TODO: torch CUDA IPC).
"""

from topk_client.client import SelectResult, TopKClient, pack_rows  # noqa: F401

__all__ = ["TopKClient", "SelectResult", "pack_rows"]
