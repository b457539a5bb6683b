"""asyncio client of topk.v1.TopK (grpc.aio): the same calls as TopKClient,
awaited, for frontends that run an event loop.

    async with AsyncTopKClient("127.0.0.1:50051") as topk:
        result = await topk.select(scores, k=2048, lengths=lengths)
"""

import asyncio
import time
from typing import Optional, Sequence, Tuple

import grpc

from topk_client._stubs import health_pb2, topk_pb2, topk_pb2_grpc
from topk_client.client import (_SERVING, Rows, SelectResult, _decode, _health_method,
                                _open_channel, _select_request, _stream_chunks)
from topk_client.tls import TlsOptions


class AsyncTopKClient:
    """A grpc.aio channel to topk-server. Create it inside the event loop
    that uses it; any number of calls may be awaited at once. tls,
    credentials: as TopKClient's."""

    def __init__(self, target: str = "127.0.0.1:50051", *, credentials=None,
                 tls: Optional[TlsOptions] = None,
                 max_message_bytes: int = 1 << 30,
                 max_send_message_bytes: Optional[int] = None,
                 max_receive_message_bytes: Optional[int] = None,
                 load_balancing_policy: Optional[str] = None,
                 options: Sequence[Tuple[str, object]] = ()):
        self._channel = _open_channel(grpc.aio, target, credentials, tls, max_message_bytes,
                                      max_send_message_bytes, max_receive_message_bytes,
                                      load_balancing_policy, options)
        self._stub = topk_pb2_grpc.TopKStub(self._channel)
        self._health = None

    async def close(self):
        await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def select(self, rows: Rows, k: int, *, lengths=None, sorted: bool = False,
                     deterministic: bool = False, return_values: bool = False,
                     request_id: str = "", timeout: Optional[float] = None,
                     dtype: Optional[str] = None) -> SelectResult:
        request = _select_request(rows, k, lengths, sorted, deterministic, return_values,
                                  request_id, dtype)
        return _decode(await self._stub.Select(request, timeout=timeout))

    async def select_streaming(self, rows: Rows, k: int, *, lengths=None,
                               chunk_bytes: int = 4 << 20, sorted: bool = False,
                               deterministic: bool = False, return_values: bool = False,
                               timeout: Optional[float] = None,
                               dtype: Optional[str] = None) -> SelectResult:
        chunks = _stream_chunks(rows, k, lengths, chunk_bytes, sorted, deterministic,
                                return_values, dtype)
        return _decode(await self._stub.SelectStream(chunks, timeout=timeout))

    async def server_info(self):
        return await self._stub.GetServerInfo(topk_pb2.GetServerInfoRequest())

    async def stats(self, prometheus_text: bool = False):
        return await self._stub.GetStats(topk_pb2.GetStatsRequest(
            include_prometheus_text=prometheus_text))

    async def is_serving(self, service: str = "topk.v1.TopK") -> bool:
        if self._health is None:
            self._health = _health_method(self._channel)
        response = await self._health(health_pb2().HealthCheckRequest(service=service), timeout=5)
        return response.status == _SERVING

    async def wait_for_serving(self, timeout: float = 30.0, service: str = "topk.v1.TopK"):
        deadline = time.monotonic() + timeout
        while True:
            try:
                if await self.is_serving(service):
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"server not SERVING within {timeout} s")
            await asyncio.sleep(0.05)
