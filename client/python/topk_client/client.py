"""grpcio client of topk.v1.TopK: numpy rows inline, answers as numpy arrays."""

import time
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from topk_client import _native
from topk_client.tls import TlsOptions, check_tls
from topk_client._stubs import health_pb2, topk_pb2, topk_pb2_grpc  # noqa: F401
from topk_client.dtypes import as_wire_rows, decode_values

# Rows: a list of 1-D arrays (ragged), or a 2-D (M, N) array, padded when
# `lengths` is given (row r is its first lengths[r] values).
Rows = Union[Sequence[np.ndarray], np.ndarray]

_SERVING = 1  # grpc.health.v1.HealthCheckResponse.SERVING


@dataclass
class SelectResult:
    indices: np.ndarray            # (M, K) int32, -1 where a row had fewer than K values
    # (M, K) when return_values, NaN at -1 slots, in the rows' type: float32,
    # float16, or uint16 BF16 patterns (topk_client.dtypes.bf16_to_float).
    values: Optional[np.ndarray]
    queue_us: int
    device_us: int
    total_us: int


def _row_layout(rows: Rows, lengths, element):
    """The rows as they will be sent, before packing, with pack_rows' checks:
    (matrix, lengths) for 2-D rows, row r being matrix[r, :lengths[r]]
    (lengths an int64 array), or (list of 1-D arrays, None) for ragged rows."""
    if lengths is not None:
        matrix = np.asarray(rows, dtype=element)
        if matrix.ndim != 2:
            raise ValueError(f"rows with lengths must be 2-D (M, N), got shape {matrix.shape}")
        lengths = np.asarray(lengths).reshape(-1).astype(np.int64)
        m, n = matrix.shape
        if lengths.shape[0] != m:
            raise ValueError(f"{lengths.shape[0]} lengths for {m} rows")
        if m and (lengths.min() < 0 or lengths.max() > n):
            raise ValueError(f"lengths must lie in [0, {n}]")
        return matrix, lengths
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        matrix = np.ascontiguousarray(rows, dtype=element)
        return matrix, np.full(matrix.shape[0], matrix.shape[1], dtype=np.int64)
    return [np.ascontiguousarray(r, dtype=element).ravel() for r in rows], None


def pack_rows(rows: Rows, lengths=None, element="<f4") -> Tuple[bytes, List[int]]:
    """Packs rows into (scores bytes, lengths): the wire layout, valid
    prefixes back to back, as `element`s (the numpy type of the wire's
    ScoreType: "<f4", "<f2", or "<u2" for BF16 patterns)."""
    data, lengths = _row_layout(rows, lengths, element)
    if lengths is None:
        scores = np.concatenate(data) if data else np.zeros(0, dtype=element)
        return scores.tobytes(), [int(a.size) for a in data]
    m, n = data.shape
    if m and lengths.min() == n:
        scores = np.ascontiguousarray(data).ravel()
    else:
        # Row-major boolean indexing keeps each row's prefix, in row order.
        scores = data[np.arange(n)[None, :] < lengths[:, None]]
    return scores.tobytes(), [int(x) for x in lengths]


def _row_starts(rows: Rows, lengths, element):
    """What the native core packs from (no copy of the scores): row start
    addresses (int64) and lengths (int32), plus the arrays that hold the
    rows (kept alive by the caller for the call)."""
    data, lengths = _row_layout(rows, lengths, element)
    if lengths is None:
        starts = np.fromiter((a.__array_interface__["data"][0] for a in data), dtype=np.int64,
                             count=len(data))
        return starts, np.fromiter((a.size for a in data), dtype=np.int32, count=len(data)), data
    if data.shape[0] and data.strides[1] != data.itemsize:
        data = np.ascontiguousarray(data)
    base = data.__array_interface__["data"][0]
    starts = base + np.arange(data.shape[0], dtype=np.int64) * data.strides[0]
    return starts, lengths.astype(np.int32), data


def channel_options(max_send_message_bytes: int = 1 << 30,
                    max_receive_message_bytes: int = 1 << 30,
                    load_balancing_policy: Optional[str] = None,
                    options: Sequence[Tuple[str, object]] = ()) -> List[Tuple[str, object]]:
    """grpcio channel arguments: message limits, the load-balancing policy
    ("round_robin" spreads calls over every address a target resolves to, e.g.
    "ipv4:10.0.0.1:50051,10.0.0.2:50051" or a headless Kubernetes service via
    "dns:///topk:50051"), then any raw `options`, which win."""
    result = [("grpc.max_send_message_length", max_send_message_bytes),
              ("grpc.max_receive_message_length", max_receive_message_bytes)]
    if load_balancing_policy:
        result.append(("grpc.lb_policy_name", load_balancing_policy))
    return result + list(options)


def _check_security(credentials, tls: Optional[TlsOptions]) -> None:
    check_tls(tls)
    if credentials is not None and tls is not None:
        raise ValueError("credentials, tls: pass one (tls serves both paths, credentials "
                         "grpcio's alone)")


def _open_channel(channels, target: str, credentials, tls: Optional[TlsOptions],
                  max_message_bytes: int,
                  max_send_message_bytes: Optional[int], max_receive_message_bytes: Optional[int],
                  load_balancing_policy: Optional[str], options: Sequence[Tuple[str, object]]):
    """A channel from `channels` (the grpc module, or grpc.aio) with the
    client's arguments: TLS when `credentials` or `tls` are given."""
    _check_security(credentials, tls)
    if tls is not None:
        credentials = grpc.ssl_channel_credentials(tls.root_certificates, tls.private_key,
                                                   tls.certificate_chain)
        if tls.server_name:  # before the raw options, which win
            options = [("grpc.ssl_target_name_override", tls.server_name)] + list(options)
    args = channel_options(max_send_message_bytes or max_message_bytes,
                           max_receive_message_bytes or max_message_bytes,
                           load_balancing_policy, options)
    if credentials is None:
        return channels.insecure_channel(target, options=args)
    return channels.secure_channel(target, credentials, options=args)


def _decode(response) -> SelectResult:
    shape = (response.num_rows, response.k)
    # Copies: writable arrays that do not keep the response alive.
    indices = np.frombuffer(response.indices, dtype="<i4").reshape(shape).copy()
    values = (decode_values(response.values, response.values_dtype, shape)
              if response.values else None)
    t = response.timings
    return SelectResult(indices, values, t.queue_us, t.device_us, t.total_us)


def _select_request(rows, k, lengths, sorted, deterministic, return_values, request_id,
                    dtype=None):
    rows, wire, element = as_wire_rows(rows, dtype)
    scores, row_lengths = pack_rows(rows, lengths, element)
    return topk_pb2.SelectRequest(
        k=k,
        options=topk_pb2.SelectOptions(sorted=sorted, deterministic=deterministic,
                                       return_values=return_values),
        inline_rows=topk_pb2.InlineRows(scores=scores, lengths=row_lengths, dtype=wire),
        request_id=request_id)


def _stream_chunks(rows, k, lengths, chunk_bytes, sorted, deterministic,
                   return_values, dtype=None) -> Iterable:
    rows, wire, element = as_wire_rows(rows, dtype)
    scores, row_lengths = pack_rows(rows, lengths, element)
    yield topk_pb2.SelectChunk(
        k=k, options=topk_pb2.SelectOptions(sorted=sorted, deterministic=deterministic,
                                            return_values=return_values), dtype=wire)
    step = max(4, chunk_bytes - chunk_bytes % 4)
    for i in range(0, max(len(scores), 1), step):
        yield topk_pb2.SelectChunk(scores=scores[i:i + step])
    per = step // 4
    for i in range(0, len(row_lengths), per):
        yield topk_pb2.SelectChunk(lengths=row_lengths[i:i + per])


def _health_method(channel):
    messages = health_pb2()
    return channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=messages.HealthCheckRequest.SerializeToString,
        response_deserializer=messages.HealthCheckResponse.FromString)


def _native_client(native, target, credentials, tls, max_message_bytes, max_send_message_bytes,
                   max_receive_message_bytes, load_balancing_policy, options):
    """The native core's client for these arguments, or None (grpcio). grpcio
    credentials and raw grpcio channel options are grpcio's alone: with
    them the core is not used (and asking for it is an error); `tls` is
    both paths'."""
    _check_security(credentials, tls)
    lib = _native.resolve(native)
    if lib is None:
        return None
    if credentials is not None or options:
        if native is None:
            return None
        raise ValueError("native: the native RPC core takes neither credentials nor raw grpcio "
                         "options; pass tls=TlsOptions(...) for TLS, or native=False (grpcio)")
    if tls is not None and not _native.has_tls(lib):
        if native is None:
            return None
        raise RuntimeError(f"native: this {_native.LIBRARY_NAME} predates TLS (no "
                           "topk_rpc_client_open_tls); rebuild topk_client_c, or pass "
                           "native=False (grpcio)")
    return _native.NativeClient(lib, target, max_send_message_bytes or max_message_bytes,
                                max_receive_message_bytes or max_message_bytes,
                                load_balancing_policy, tls)


class TopKClient:
    """A channel to topk-server (one address, or several with a load-balancing
    policy); safe to share between threads. For asyncio: AsyncTopKClient.

    native: inline select() goes through the native core (libtopk_client_c.so,
    topk_client._native) when it is found, else grpcio; True requires it, a
    path names it, False keeps to grpcio. Same arguments, checks, answers and
    error types either way (a failed call: a grpc.RpcError with code() and
    details()). Everything else (streaming, futures, stats, health) is
    grpcio's.

    tls: a topk_client.TlsOptions (roots, this client's certificate and key
    for mutual TLS, the server name), for both paths. credentials: a
    grpc.ChannelCredentials instead, grpcio's alone (the core is then not
    used). Neither: plaintext."""

    def __init__(self, target: str = "127.0.0.1:50051", *, credentials=None,
                 tls: Optional[TlsOptions] = None,
                 max_message_bytes: int = 1 << 30,
                 max_send_message_bytes: Optional[int] = None,
                 max_receive_message_bytes: Optional[int] = None,
                 load_balancing_policy: Optional[str] = None,
                 options: Sequence[Tuple[str, object]] = (),
                 native: Union[bool, str, None] = None):
        self._native = _native_client(native, target, credentials, tls, max_message_bytes,
                                      max_send_message_bytes, max_receive_message_bytes,
                                      load_balancing_policy, options)
        self._channel = _open_channel(grpc, target, credentials, tls, max_message_bytes,
                                      max_send_message_bytes, max_receive_message_bytes,
                                      load_balancing_policy, options)
        self._stub = topk_pb2_grpc.TopKStub(self._channel)
        self._health = None

    @property
    def native(self) -> bool:
        """Whether select() goes through the native core."""
        return self._native is not None

    def close(self):
        if self._native is not None:
            self._native.close()
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def select(self, rows: Rows, k: int, *, lengths=None, sorted: bool = False,
               deterministic: bool = False, return_values: bool = False,
               request_id: str = "", timeout: Optional[float] = None,
               dtype: Optional[str] = None) -> SelectResult:
        """Top-k indices of every row: a list of 1-D arrays (they may differ in
        length), or a 2-D (M, N) array, padded when `lengths` is given.
        dtype ("fp32" | "bf16" | "fp16"): the type the rows travel as; None
        infers it (float16 arrays and tensors: fp16, torch.bfloat16: bf16,
        else fp32). uint16 arrays are raw BF16 / FP16 patterns and need it."""
        if self._native is not None:
            return self._select_native(rows, k, lengths, sorted, deterministic, return_values,
                                       request_id, timeout, dtype)
        request = _select_request(rows, k, lengths, sorted, deterministic, return_values,
                                  request_id, dtype)
        return _decode(self._stub.Select(request, timeout=timeout))

    def _select_native(self, rows, k, lengths, sorted, deterministic, return_values,
                       request_id, timeout, dtype) -> SelectResult:
        rows, wire, element = as_wire_rows(rows, dtype)
        starts, row_lengths, held = _row_starts(rows, lengths, element)
        m = starts.shape[0]
        indices = np.empty((m, k), dtype=np.int32) if k > 0 else np.empty((m, 0), np.int32)
        values = np.empty((m, k), dtype=element) if return_values and k > 0 else None
        state = self._native.state()
        request, answer = state.request, state.answer
        request.k, request.num_rows, request.dtype = k, m, wire
        request.options = ((_native.SORTED if sorted else 0) |
                           (_native.DETERMINISTIC if deterministic else 0) |
                           (_native.RETURN_VALUES if return_values else 0))
        request.rows = starts.__array_interface__["data"][0] if m else None
        request.lengths = row_lengths.__array_interface__["data"][0] if m else None
        request.request_id = request_id.encode() if request_id else None
        request.timeout_us = int(timeout * 1e6) if timeout else 0
        answer.indices = indices.__array_interface__["data"][0]
        answer.values = values.__array_interface__["data"][0] if values is not None else None
        answer.capacity = indices.size
        self._native.select_inline(state)
        del held  # the rows were packed by the call
        if answer.num_rows != m or answer.k != k:  # the core fills what the server sent
            indices = indices.reshape(-1)[:answer.num_rows * answer.k].reshape(
                answer.num_rows, answer.k)
            values = None if values is None else values.reshape(-1)[
                :answer.num_rows * answer.k].reshape(answer.num_rows, answer.k)
        t = answer.timings
        return SelectResult(indices, values, t.queue_us, t.device_us, t.total_us)

    def select_future(self, rows: Rows, k: int, *, lengths=None, sorted: bool = False,
                      deterministic: bool = False, return_values: bool = False,
                      request_id: str = "", timeout: Optional[float] = None,
                      dtype: Optional[str] = None):
        """Asynchronous select on a thread: a grpc.Future whose result() is the
        raw response; decode with TopKClient.decode."""
        request = _select_request(rows, k, lengths, sorted, deterministic, return_values,
                                  request_id, dtype)
        return self._stub.Select.future(request, timeout=timeout)

    decode = staticmethod(_decode)

    def select_streaming(self, rows: Rows, k: int, *, lengths=None, chunk_bytes: int = 4 << 20,
                         sorted: bool = False, deterministic: bool = False,
                         return_values: bool = False, timeout: Optional[float] = None,
                         dtype: Optional[str] = None):
        """Like select, but sent as SelectStream chunks: no message-size bound."""
        return _decode(self._stub.SelectStream(
            _stream_chunks(rows, k, lengths, chunk_bytes, sorted, deterministic, return_values,
                           dtype),
            timeout=timeout))

    def server_info(self):
        return self._stub.GetServerInfo(topk_pb2.GetServerInfoRequest())

    def stats(self, prometheus_text: bool = False):
        return self._stub.GetStats(topk_pb2.GetStatsRequest(
            include_prometheus_text=prometheus_text))

    def is_serving(self, service: str = "topk.v1.TopK") -> bool:
        if self._health is None:
            self._health = _health_method(self._channel)
        response = self._health(health_pb2().HealthCheckRequest(service=service), timeout=5)
        return response.status == _SERVING

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
