"""grpcio client of topk.v1.TopK: numpy rows inline."""

import os
import sys
import time
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import grpc
import numpy as np

# The generated modules import each other as `topk.v1.*`, so their root goes
# on sys.path (only our _proto directory; it holds no `grpc` package).
_PROTO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_proto")
if _PROTO_ROOT not in sys.path:
    sys.path.insert(0, _PROTO_ROOT)
try:
    from topk.v1 import topk_pb2, topk_pb2_grpc  # noqa: E402
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "topk_client: generated stubs missing; build with CMake (build/python/topk_client) "
        "or run client/python/generate.sh") from e


@dataclass
class SelectResult:
    indices: np.ndarray            # (M, K) int32, -1 where a row had fewer than K values
    values: Optional[np.ndarray]   # (M, K) float32 when return_values, NaN at -1 slots
    queue_us: int
    device_us: int
    total_us: int


def pack_rows(rows: Sequence[np.ndarray]):
    """Packs ragged rows into (scores bytes, lengths): the wire layout."""
    arrays = [np.ascontiguousarray(r, dtype="<f4").ravel() for r in rows]
    lengths = [int(a.size) for a in arrays]
    scores = np.concatenate(arrays) if arrays else np.zeros(0, dtype="<f4")
    return scores.tobytes(), lengths


def _decode(response) -> SelectResult:
    shape = (response.num_rows, response.k)
    indices = np.frombuffer(response.indices, dtype="<i4").reshape(shape)
    values = (np.frombuffer(response.values, dtype="<f4").reshape(shape)
              if response.values else None)
    t = response.timings
    return SelectResult(indices, values, t.queue_us, t.device_us, t.total_us)


class TopKClient:
    """A channel to one topk-server; safe to share between threads."""

    def __init__(self, target: str = "127.0.0.1:50051", *, credentials=None,
                 max_message_bytes: int = 1 << 30):
        options = [("grpc.max_send_message_length", max_message_bytes),
                   ("grpc.max_receive_message_length", max_message_bytes)]
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._stub = topk_pb2_grpc.TopKStub(self._channel)
        # grpc.health.v1 spoken by hand: generating its stubs into a `grpc`
        # package would shadow grpcio. Request field 1 = service name;
        # response field 1 = status (1 SERVING).
        self._health = self._channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda name: (b"\x0a" + bytes([len(name)]) + name.encode()
                                             if name else b""),
            response_deserializer=lambda data: data[1] if len(data) >= 2 else 0)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _request(rows, k, sorted, deterministic, return_values, request_id):
        scores, lengths = pack_rows(rows)
        return topk_pb2.SelectRequest(
            k=k,
            options=topk_pb2.SelectOptions(sorted=sorted, deterministic=deterministic,
                                           return_values=return_values),
            inline_rows=topk_pb2.InlineRows(scores=scores, lengths=lengths),
            request_id=request_id)

    def select(self, rows: Sequence[np.ndarray], k: int, *, sorted: bool = False,
               deterministic: bool = False, return_values: bool = False,
               request_id: str = "", timeout: Optional[float] = None) -> SelectResult:
        """Top-k indices of every row (rows may differ in length)."""
        request = self._request(rows, k, sorted, deterministic, return_values, request_id)
        return _decode(self._stub.Select(request, timeout=timeout))

    def select_future(self, rows, k, **kwargs):
        """Asynchronous select: a grpc.Future whose result() is the raw response;
        decode with TopKClient.decode."""
        request = self._request(rows, k, kwargs.get("sorted", False),
                                kwargs.get("deterministic", False),
                                kwargs.get("return_values", False), kwargs.get("request_id", ""))
        return self._stub.Select.future(request, timeout=kwargs.get("timeout"))

    decode = staticmethod(_decode)

    def select_streaming(self, rows: Sequence[np.ndarray], k: int, *, chunk_bytes: int = 4 << 20,
                         sorted: bool = False, deterministic: bool = False,
                         return_values: bool = False, timeout: Optional[float] = None):
        """Like select, but sent as SelectStream chunks: no message-size bound."""
        scores, lengths = pack_rows(rows)

        def chunks() -> Iterable:
            yield topk_pb2.SelectChunk(
                k=k, options=topk_pb2.SelectOptions(sorted=sorted, deterministic=deterministic,
                                                    return_values=return_values))
            step = max(4, chunk_bytes)
            for i in range(0, max(len(scores), 1), step):
                yield topk_pb2.SelectChunk(scores=scores[i:i + step])
            per = step // 4
            for i in range(0, len(lengths), per):
                yield topk_pb2.SelectChunk(lengths=lengths[i:i + per])

        return _decode(self._stub.SelectStream(chunks(), timeout=timeout))

    def server_info(self):
        return self._stub.GetServerInfo(topk_pb2.GetServerInfoRequest())

    def stats(self, prometheus_text: bool = False):
        return self._stub.GetStats(topk_pb2.GetStatsRequest(
            include_prometheus_text=prometheus_text))

    def is_serving(self, service: str = "topk.v1.TopK") -> bool:
        return self._health(service, timeout=5) == 1

    def wait_for_serving(self, timeout: float = 30.0, service: str = "topk.v1.TopK"):
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.is_serving(service):
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"server not SERVING within {timeout} s")
            time.sleep(0.05)

    # Rows and answers by reference (shared memory, CUDA IPC): see
    # topk_client.regions.ZeroCopyClient.
