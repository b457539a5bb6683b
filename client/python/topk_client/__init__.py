"""Python client of topk-server (topk.v1.TopK), for serving frontends.

    from topk_client import TopKClient
    client = TopKClient("127.0.0.1:50051")
    indices = client.select([row0, row1], k=2048).indices   # numpy int32 (M, K)
    indices = client.select(padded, k=2048, lengths=lengths).indices   # padded (M, N) rows
    indices = client.select(rows16, k=2048).indices   # float16 / torch.bfloat16: 2 bytes each

Several replicas: TopKClient("ipv4:10.0.0.1:50051,10.0.0.2:50051",
load_balancing_policy="round_robin"). asyncio: AsyncTopKClient (topk_client.aio),
the same calls awaited.

The generated stubs live in topk_client/_proto and topk_client/_health_proto
(made by `pip install client/python`, by client/python/generate.sh next to
these sources, or by the CMake build into build/python/topk_client).

Zero-copy (rows and answers by reference, the server on the same host):

    from topk_client import ZeroCopyClient
    with ZeroCopyClient("unix:/run/topk.sock") as topk:
        indices = topk.select(scores, lengths, k=2048)   # scores: (M, N) float32 CUDA tensor
"""

from topk_client.aio import AsyncTopKClient  # noqa: F401
from topk_client.client import SelectResult, TopKClient, channel_options, pack_rows  # noqa: F401
from topk_client.dtypes import bf16_to_float, float_to_bf16  # noqa: F401
from topk_client.regions import (  # noqa: F401
    RegionError, RegionSession, SelectError, SelectPipeline, ZeroCopyClient)
from topk_client.channel import Channel, ChannelError  # noqa: F401

__all__ = ["TopKClient", "AsyncTopKClient", "SelectResult", "pack_rows", "channel_options",
           "ZeroCopyClient", "RegionSession", "RegionError", "SelectError", "SelectPipeline",
           "bf16_to_float", "float_to_bf16", "Channel", "ChannelError"]
