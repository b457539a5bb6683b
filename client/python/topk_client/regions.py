"""Zero-copy Select for co-located clients: rows, lengths and outputs stay in
memory shared with the server and travel by reference.

* torch CUDA tensors: shared over CUDA IPC in torch's own sharing format
  (the storage's base allocation handle plus the storage and tensor offsets),
  each allocation registered once per session and cached; the GPU named by
  UUID; GPU-side ordering with interprocess CUDA events, so the caller's
  stream never synchronises with the host.
* numpy arrays: allocated in POSIX shared memory by the session
  (`shared_array`), for servers on the CPU backend or without a GPU.

    from topk_client import ZeroCopyClient
    with ZeroCopyClient("unix:/run/topk.sock") as topk:
        indices = topk.select(scores, lengths, k=2048)          # scores: (M, N) cuda float32
        topk.select(scores, lengths, k=2048, out=indices)       # written in place

Each select goes on a SelectPipeline stream the client keeps open (one
message each way per request, no per-call setup); call="unary" sends one
unary Select per request instead. The server must run with --enable_regions
and see this process as local (loopback or a unix socket). Ordering: by default the inputs are ready when
the current CUDA stream reaches the call (an event recorded there is what
the server waits on) and `out` is complete on that stream when select
returns (the stream waits on the server's event). With ordering="host",
the stream is synchronised before the request instead.
"""

import contextlib
import ctypes
import hashlib
import itertools
import os
import queue
import threading
from multiprocessing import shared_memory
from typing import Optional, Sequence

import grpc
import numpy as np

from topk_client import _checks
from topk_client._checks import RegionError
from topk_client.client import TopKClient, _decode, topk_pb2


_PROOF_BYTES = 16


@contextlib.contextmanager
def _proving_ownership(shm_name: str, offset: int, session_id: str):
    """The server maps a shared-memory object only once it holds the
    session's ownership proof (docs/regions.md, "Trust model"): 16 bytes of
    SHA-256("topk-shm-ownership\\0" + session id), at the registered offset
    when they fit before the object's end, else in its last 16 bytes. Written
    through this process's own descriptor for the registration, the bytes
    they replaced put back afterwards; an object this process cannot open
    read-write goes without, and the server refuses it."""
    try:
        fd = os.open("/dev/shm" + shm_name, os.O_RDWR)
    except OSError:
        yield
        return
    try:
        size = os.fstat(fd).st_size
        at, saved = None, b""
        if size >= _PROOF_BYTES:
            at = offset if offset <= size - _PROOF_BYTES else size - _PROOF_BYTES
            saved = os.pread(fd, _PROOF_BYTES, at)
            proof = hashlib.sha256(b"topk-shm-ownership\0" + session_id.encode()).digest()
            os.pwrite(fd, proof[:_PROOF_BYTES], at)
        try:
            yield
        finally:
            if at is not None:
                os.pwrite(fd, saved, at)
    finally:
        os.close(fd)


def _cuda_allocation_size(pointer: int) -> Optional[int]:
    """Bytes of the CUDA allocation holding `pointer` (from its base), by the
    driver's address-range query; None when the driver cannot be asked."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    query = libcuda.cuMemGetAddressRange_v2
    query.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                      ctypes.c_uint64]
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    if query(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer)) != 0:
        return None
    return size.value


# torch's sharing format for a storage's allocation (c10's caching
# allocator): a version byte, a type byte, then the handle itself: 'c' for a
# cudaMalloc'd segment (followed by its 64-byte cudaIpcMemHandle_t), 'e' for
# an expandable segment (followed by torch's own description of its pages,
# which no cudaIpcMemHandle_t can open). Older torch sent the 64 bytes alone.
_TORCH_CUDA_MALLOC = ord("c")
_TORCH_EXPANDABLE_SEGMENT = ord("e")
_IPC_HANDLE_BYTES = 64


def _cuda_ipc_handle(shared: bytes, what: str) -> bytes:
    if len(shared) == _IPC_HANDLE_BYTES:
        return shared
    if len(shared) >= 2 and shared[1] == _TORCH_CUDA_MALLOC and \
            len(shared) == 2 + _IPC_HANDLE_BYTES:
        return shared[2:]
    if len(shared) >= 2 and shared[1] == _TORCH_EXPANDABLE_SEGMENT:
        raise RegionError(
            f"{what}: this tensor's storage lives in an expandable segment, which cannot be "
            "exported as a CUDA IPC memory handle: run with "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False, or copy the tensor")
    raise RegionError(f"{what}: torch's sharing handle ({len(shared)} bytes, type "
                      f"{shared[1:2]!r}) is not a format this client knows")


_STATUS_CODES = {code.value[0]: code for code in grpc.StatusCode}


class SelectError(grpc.RpcError):
    """A request a SelectPipeline answered with an error: code() and
    details() as a failed unary call's grpc.RpcError."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self._code = _STATUS_CODES.get(code, grpc.StatusCode.UNKNOWN)
        self._message = message

    def code(self):
        return self._code

    def details(self):
        return self._message

    def __str__(self):
        return f"{self._code.name}: {self._message}"


class SelectPipeline:
    """A SelectPipeline stream held open: call() sends one SelectRequest and
    returns its SelectResponse (raising SelectError with the request's
    status). One call at a time; a stream the server ended (idle past its
    timeout) is reopened at the next call."""

    def __init__(self, stub):
        self._stub = stub
        self._lock = threading.Lock()
        self._requests = None
        self._replies = None

    def _open(self):
        self._requests = queue.SimpleQueue()
        self._replies = self._stub.SelectPipeline(iter(self._requests.get, None))

    def call(self, request):
        with self._lock:
            if self._replies is None or self._replies.done():
                self._open()
            self._requests.put(request)
            try:
                reply = next(self._replies)
            except StopIteration:
                self._replies = None
                raise SelectError(grpc.StatusCode.UNAVAILABLE.value[0],
                                  "SelectPipeline: the server ended the stream")
            if reply.code != 0:
                raise SelectError(reply.code, reply.message)
            return reply.response

    def close(self):
        with self._lock:
            if self._replies is not None:
                self._requests.put(None)  # half-close: the server ends the stream
                for _ in self._replies:
                    pass
                self._replies = None


class RegionSession:
    """An OpenSession stream held open; regions registered through it are
    released by the server when it closes (or this process dies)."""

    def __init__(self, client: TopKClient):
        self._stub = client._stub
        self._call = self._stub.OpenSession(topk_pb2.OpenSessionRequest())
        self.id = next(self._call).session_id

    def close(self):
        self._call.cancel()

    def register(self, name: str, **kind):
        """register(name, shm=ShmRegion(...) | cuda_ipc=CudaIpcRegion(...) |
        cuda_event=CudaIpcEvent(...)); shared memory with its ownership proof."""
        request = topk_pb2.RegisterRegionRequest(session_id=self.id, name=name, **kind)
        if "shm" not in kind:
            return self._stub.RegisterRegion(request)
        with _proving_ownership(request.shm.shm_name, request.shm.offset, self.id):
            return self._stub.RegisterRegion(request)

    def unregister(self, name: str):
        self._stub.UnregisterRegion(topk_pb2.UnregisterRegionRequest(session_id=self.id, name=name))

    def unregister_all(self) -> int:
        return self._stub.UnregisterRegion(
            topk_pb2.UnregisterRegionRequest(session_id=self.id, all=True)).unregistered

    def list(self):
        return list(self._stub.ListRegions(topk_pb2.ListRegionsRequest(session_id=self.id)).regions)


class _HostRegion:
    """A numpy-visible POSIX shared-memory segment registered in a session."""

    def __init__(self, session: RegionSession, name: str, nbytes: int):
        self.name = name
        self.shm = shared_memory.SharedMemory(create=True, size=nbytes)
        session.register(name, shm=topk_pb2.ShmRegion(shm_name="/" + self.shm.name, offset=0,
                                                      byte_size=nbytes))
        self.base = np.frombuffer(self.shm.buf, dtype=np.uint8).ctypes.data
        self.nbytes = nbytes

    def offset_of(self, array: np.ndarray) -> Optional[int]:
        start = array.__array_interface__["data"][0]
        if self.base <= start and start + array.nbytes <= self.base + self.nbytes:
            return start - self.base
        return None

    def close(self):
        self.shm.close()
        self.shm.unlink()


class ZeroCopyClient:
    """A TopKClient plus a region session: select() takes torch CUDA tensors
    or numpy arrays from shared_array() and sends them by reference."""

    def __init__(self, target: str = "127.0.0.1:50051", call: str = "pipeline", **client_kwargs):
        if call not in ("pipeline", "unary"):
            raise ValueError("call: 'pipeline' or 'unary'")
        self.client = TopKClient(target, **client_kwargs)
        self.session = RegionSession(self.client)
        self._pipeline = SelectPipeline(self.client._stub) if call == "pipeline" else None
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._cuda_regions = {}   # (device, handle) -> (name, byte_size)
        self._host_regions = []
        self._events = {}         # device -> (ready, done) torch.cuda.Event

    def close(self):
        for channel in list(getattr(self, "_channels", ())):
            channel.close()  # their calls name the session's regions: before it ends
        if self._pipeline is not None:
            self._pipeline.close()  # its requests name the session: done first
        self.session.close()
        for region in self._host_regions:
            region.close()
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- channels -------------------------------------------------------------

    def channel(self, k: int, max_rows: int, max_width: int, *, dtype=None, sorted: bool = False,
                deterministic: bool = False, return_values: bool = False):
        """A GPU-ordered channel of this session (topk_client.channel.Channel):
        K, the score type (a torch dtype; None: float32), the options and the
        caps fixed; each select() then is one stream memory operation batch on
        the current CUDA stream, capturable in a CUDA graph. Opened on its
        first select; closed by close() or with this client."""
        from topk_client.channel import Channel
        channel = Channel(self, k, max_rows, max_width, dtype=dtype, sorted=sorted,
                          deterministic=deterministic, return_values=return_values)
        if not hasattr(self, "_channels"):
            self._channels = []
        self._channels.append(channel)
        return channel

    # --- host memory (numpy) -------------------------------------------------

    def shared_array(self, shape, dtype=np.float32) -> np.ndarray:
        """A zeroed numpy array in a new shared-memory region of this session."""
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        region = _HostRegion(self.session, f"host{next(self._names)}", max(nbytes, 1))
        self._host_regions.append(region)
        return np.ndarray(shape, dtype=dtype, buffer=region.shm.buf)

    def _host_ref(self, array: np.ndarray, what: str):
        for region in self._host_regions:
            offset = region.offset_of(array)
            if offset is not None:
                return topk_pb2.RegionRef(region=region.name, offset=offset)
        raise RegionError(f"{what} is not in this session's shared memory: allocate it with "
                          "ZeroCopyClient.shared_array")

    # --- device memory (torch) -----------------------------------------------

    @staticmethod
    def _uuid(device) -> str:
        import torch
        text = str(torch.cuda.get_device_properties(device).uuid)
        return text if text.startswith("GPU-") else "GPU-" + text

    def _cuda_ref(self, tensor, what: str):
        """The tensor's place as a region reference, registering its base
        allocation on first use (cached per allocation)."""
        storage = tensor.untyped_storage()
        try:
            shared = storage._share_cuda_()
        except RuntimeError as e:
            raise RegionError(
                f"{what}: this tensor's storage cannot be exported over CUDA IPC ({e}); "
                "allocations from expandable segments cannot: run with "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False, or copy the tensor") from e
        device, handle, storage_bytes, storage_offset = shared[0], shared[1], shared[2], shared[3]
        handle = _cuda_ipc_handle(bytes(handle), what)
        base = storage.data_ptr() - storage_offset
        key = (device, handle)
        end = storage_offset + storage_bytes
        with self._lock:
            cached = self._cuda_regions.get(key)
            if cached is None or cached[1] < end:
                size = _cuda_allocation_size(base) or end
                name = f"cuda{next(self._names)}"
                self.session.register(name, cuda_ipc=topk_pb2.CudaIpcRegion(
                    ipc_handle=handle, offset=0, byte_size=max(size, end),
                    device=topk_pb2.GpuDevice(uuid=self._uuid(device))))
                cached = (name, max(size, end))
                self._cuda_regions[key] = cached
        offset = storage_offset + tensor.storage_offset() * tensor.element_size()
        return topk_pb2.RegionRef(region=cached[0], offset=offset)

    def _ordering_events(self, device):
        import torch
        with self._lock:
            if device not in self._events:
                ready = torch.cuda.Event(interprocess=True)
                done = torch.cuda.Event(interprocess=True)
                with torch.cuda.device(device):
                    ready.record()  # an event gets its IPC handle once recorded
                    done.record()
                for name, event in ((f"ready{device}", ready), (f"done{device}", done)):
                    self.session.register(name, cuda_event=topk_pb2.CudaIpcEvent(
                        ipc_event_handle=bytes(event.ipc_handle()),
                        device=topk_pb2.GpuDevice(uuid=self._uuid(device))))
                self._events[device] = (ready, done)
            return self._events[device]

    # --- select --------------------------------------------------------------

    def select(self, scores, lengths, k: int, *, out=None, values=None, sorted: bool = False,
               deterministic: bool = False, ordering: str = "event", request_id: str = "",
               dtype: Optional[str] = None):
        """Top-k indices of every row of the 2-D padded `scores` (M, N), row r's
        valid prefix being lengths[r] long.

        scores: a torch CUDA float32, bfloat16 or float16 tensor (rows
        contiguous, any row stride) or a numpy float32 / float16 array from
        shared_array() (uint16 arrays of raw patterns with dtype="bf16" or
        "fp16"). lengths: a sequence / numpy array (sent inline), or an int32
        tensor on the scores' GPU (read there; then no length may exceed N).
        out: (M, >=k) int32 on the same device to write in place; None: a new
        tensor (torch, written in place on the GPU) or numpy array (from the
        reply). values: (M, >=k) like out, of the scores' type, to also get the
        selected values.
        Returns out (or the new indices)."""
        is_torch = _checks.is_torch(scores)
        _checks.check_rows(scores)
        m = scores.shape[0]
        rows = topk_pb2.RegionRows(num_rows=m)
        request = topk_pb2.SelectRequest(
            k=k, request_id=request_id, session_id=self.session.id,
            options=topk_pb2.SelectOptions(sorted=sorted, deterministic=deterministic,
                                           return_values=values is not None))
        if is_torch:
            return self._select_torch(request, rows, scores, lengths, k, out, values, ordering)
        return self._select_numpy(request, rows, scores, lengths, k, out, values, dtype)

    def _select_torch(self, request, rows, scores, lengths, k, out, values, ordering):
        import torch
        rows.dtype = _checks.score_type(
            scores, {torch.float32: topk_pb2.SCORE_TYPE_FP32,
                     torch.bfloat16: topk_pb2.SCORE_TYPE_BF16,
                     torch.float16: topk_pb2.SCORE_TYPE_FP16})
        device = scores.device
        rows.scores.CopyFrom(self._cuda_ref(scores, "scores"))
        rows.row_pitch = scores.stride(0)
        if isinstance(lengths, torch.Tensor) and lengths.is_cuda:
            _checks.check_device_lengths(lengths, device, torch.int32)
            rows.lengths_ref.CopyFrom(self._cuda_ref(lengths, "lengths"))
            rows.width = scores.shape[1]
        else:
            rows.lengths.extend(int(x) for x in (lengths.tolist() if hasattr(lengths, "tolist")
                                                 else lengths))
        if out is None:
            out = torch.empty((scores.shape[0], k), dtype=torch.int32, device=device)
        _checks.check_outputs(scores, k, out, values, torch.int32)
        request.region_rows.CopyFrom(rows)
        request.output.indices.CopyFrom(self._cuda_ref(out, "out"))
        request.output.row_stride = out.stride(0)
        if values is not None:
            _checks.check_values_stride(out, values)
            request.output.values.CopyFrom(self._cuda_ref(values, "values"))
        stream = torch.cuda.current_stream(device)
        if ordering == "event":
            ready, done = self._ordering_events(device.index)
            ready.record(stream)
            request.ordering.wait_event = f"ready{device.index}"
            request.ordering.record_event = f"done{device.index}"
        else:
            stream.synchronize()
        self._send(request)
        if ordering == "event":
            stream.wait_event(done)
        return out

    def _select_numpy(self, request, rows, scores, lengths, k, out, values, dtype):
        if scores.dtype == np.float32 and dtype in (None, "fp32"):
            rows.dtype = topk_pb2.SCORE_TYPE_FP32
        elif scores.dtype == np.float16 and dtype in (None, "fp16"):
            rows.dtype = topk_pb2.SCORE_TYPE_FP16
        elif scores.dtype == np.uint16 and dtype in ("bf16", "fp16"):
            rows.dtype = topk_pb2.SCORE_TYPE_BF16 if dtype == "bf16" else topk_pb2.SCORE_TYPE_FP16
        else:
            raise RegionError("scores: float32, float16, or uint16 with dtype='bf16' or 'fp16'")
        if values is not None and values.itemsize != scores.itemsize:
            raise RegionError(f"values: {scores.itemsize}-byte elements, the scores' type")
        rows.scores.CopyFrom(self._host_ref(scores, "scores"))
        rows.row_pitch = scores.strides[0] // scores.itemsize
        if isinstance(lengths, np.ndarray) and self._owns(lengths):
            rows.lengths_ref.CopyFrom(self._host_ref(np.ascontiguousarray(lengths), "lengths"))
        else:
            rows.lengths.extend(int(x) for x in lengths)
        request.region_rows.CopyFrom(rows)
        if out is not None:
            request.output.indices.CopyFrom(self._host_ref(out, "out"))
            request.output.row_stride = out.strides[0] // 4
            if values is not None:
                request.output.values.CopyFrom(self._host_ref(values, "values"))
        elif values is not None:
            raise RegionError("values: give out as well (or neither)")
        response = self._send(request)
        return out if out is not None else _decode(response).indices

    def _send(self, request):
        if self._pipeline is not None:
            return self._pipeline.call(request)
        return self.client._stub.Select(request)

    def _owns(self, array: np.ndarray) -> bool:
        return any(region.offset_of(array) is not None for region in self._host_regions)
