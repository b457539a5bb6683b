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
unary Select per request instead. With the native core (topk_client._native,
the default when libtopk_client_c.so is found) the session and the selects
are the C++ client's, at its cost; otherwise grpcio's. The server must run with --enable_regions
and see this process as local (loopback or a unix socket). Ordering: by default the inputs are ready when
the current CUDA stream reaches the call (an event recorded there is what
the server waits on) and `out` is complete on that stream when select
returns (the stream waits on the server's event). With ordering="host",
the stream is synchronised before the request instead.
"""

import contextlib
import hashlib
import itertools
import os
import queue
import threading
from multiprocessing import shared_memory
from typing import NamedTuple, Optional, Union

import grpc
import numpy as np

from topk_client import _checks, _native, _ref_request
from topk_client._checks import RegionError
from topk_client._cuda_ipc import cuda_allocation_size, cuda_ipc_handle
from topk_client._errors import SelectError
from topk_client._region_cache import _RegionCache
from topk_client.client import TopKClient, _decode, topk_pb2


class _Ref(NamedTuple):
    """A place in a registered region (a RegionRef's two fields)."""
    region: str
    offset: int


_PROOF_BYTES = 16


@contextlib.contextmanager
def _proving_ownership(shm_name: str, offset: int, session_id: str):
    """The server maps a shared-memory object only once it holds the
    session's ownership proof (docs/regions.md, "Trust model"): 16 bytes of
    SHA-256("topk-shm-ownership\\0" + session id), at the registered offset
    when they fit before the object's end, else in its last 16 bytes. Written
    through this process's own descriptor for the registration, the bytes
    they replaced put back afterwards; an object this process cannot open
    read-write goes without, and the server refuses it.

    The name is checked as the server checks it before it becomes a path:
    "/name" of 2..255 bytes, no other '/', no NUL, not "/." or "/.." (a name
    like "/../home/f" would otherwise have these 16 bytes written into
    that file). A name that fails goes without the proof, and the server
    refuses it with INVALID_ARGUMENT. O_NOFOLLOW as shm_open(3) opens: a
    symbolic link planted in /dev/shm is not followed."""
    encoded = shm_name.encode("utf-8", "surrogateescape") if isinstance(shm_name, str) else b""
    if (not 2 <= len(encoded) <= 255 or encoded[:1] != b"/" or b"/" in encoded[1:]
            or b"\0" in encoded or encoded in (b"/.", b"/..")):
        yield
        return
    try:
        fd = os.open(b"/dev/shm" + encoded, os.O_RDWR | os.O_NOFOLLOW)
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

    def __init__(self, session, name: str, nbytes: int):
        self.name = name
        self.cname = name.encode()
        self.shm = shared_memory.SharedMemory(create=True, size=nbytes)
        session.register(name, shm=topk_pb2.ShmRegion(shm_name="/" + self.shm.name, offset=0,
                                                      byte_size=nbytes))
        self.base = np.frombuffer(self.shm.buf, dtype=np.uint8).ctypes.data
        self.nbytes = nbytes

    def close(self):
        self.shm.close()
        self.shm.unlink()


class ZeroCopyClient:
    """A TopKClient plus a region session: select() takes torch CUDA tensors
    or numpy arrays from shared_array() and sends them by reference.

    native: as TopKClient's (the client's choice is this one's): with the
    native core (libtopk_client_c.so) the session, its registrations and its
    selects are the C++ client's (pipelined on its stream, or unary); else
    grpcio's. Same arguments, checks, answers and error types either way.
    client_kwargs: TopKClient's (tls=TlsOptions(...) for TLS or mutual TLS)."""

    def __init__(self, target: str = "127.0.0.1:50051", call: str = "pipeline", *,
                 native: Union[bool, str, None] = None, **client_kwargs):
        if call not in ("pipeline", "unary"):
            raise ValueError("call: 'pipeline' or 'unary'")
        self.client = TopKClient(target, native=native, **client_kwargs)
        self._core = None
        self._pipeline = None
        if self.client._native is not None:
            self._core = _native.NativeSession(self.client._native, unary=call == "unary")
            self.session = _ref_request.NativeRegionSession(self._core, self.client._stub)
        else:
            self.session = RegionSession(self.client)
            self._pipeline = SelectPipeline(self.client._stub) if call == "pipeline" else None
        self._local = threading.local()  # the grpcio path's per-thread call state
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._cuda_regions = {}   # (device, handle) -> (name, byte_size)
        self._host_regions = []
        self._events = {}         # device -> (ready, done) torch.cuda.Event

    @property
    def native(self) -> bool:
        """Whether calls go through the native core."""
        return self._core is not None

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

    def _host_find(self, array: np.ndarray):
        """(region, offset) of an array in this session's shared memory, or
        None. Its address is asked of numpy once (a dict per ask), then
        compared with every region's bounds."""
        start = array.__array_interface__["data"][0]
        end = start + array.nbytes
        for region in self._host_regions:
            if region.base <= start and end <= region.base + region.nbytes:
                return region, start - region.base
        return None

    def _host_place(self, array: np.ndarray, what: str):
        """(region, offset) of an array in this session's shared memory."""
        place = self._host_find(array)
        if place is not None:
            return place
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
        handle = cuda_ipc_handle(bytes(handle), what)
        base = storage.data_ptr() - storage_offset
        key = (device, handle)
        end = storage_offset + storage_bytes
        with self._lock:
            cached = self._cuda_regions.get(key)
            if cached is None or cached[1] < end:
                size = cuda_allocation_size(base) or end
                name = f"cuda{next(self._names)}"
                self.session.register(name, cuda_ipc=topk_pb2.CudaIpcRegion(
                    ipc_handle=handle, offset=0, byte_size=max(size, end),
                    device=topk_pb2.GpuDevice(uuid=self._uuid(device))))
                cached = (name, max(size, end))
                self._cuda_regions[key] = cached
        offset = storage_offset + tensor.storage_offset() * tensor.element_size()
        return _Ref(cached[0], offset)

    def _cuda_place(self, tensor, what: str):
        """(region name, offset) of a tensor, as the request structure takes
        them: _cuda_ref behind the channels' cache, so that a storage already
        seen (while it lives) costs a dictionary lookup, not a CUDA IPC
        handle from torch on every call."""
        cache = self.__dict__.get("_cuda_cache")
        if cache is None:
            cache = self._cuda_cache = _RegionCache(self)
        region, offset = cache.lookup(tensor, what, capturing=False)
        return region.encode(), offset

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
        _checks.check_rows(scores)
        common = (k, scores.shape[0], _ref_request.flags(sorted, deterministic, values is not None),
                  request_id.encode() if request_id else None)
        if _checks.is_torch(scores):
            return self._select_torch(common, scores, lengths, k, out, values, ordering)
        return self._select_numpy(common, scores, lengths, k, out, values, dtype)

    def _call_state(self, common, dtype: int):
        """This thread's request structure (the native core's, or our own),
        its common fields filled: taken once the scores' type is known good."""
        if self._core is not None:
            state = self._core.state()
        else:
            state = getattr(self._local, "state", None)
            if state is None:
                state = self._local.state = _native._CallState(_native.RefSelect)
        request = state.request
        request.k, request.num_rows, request.options, request.request_id = common
        request.dtype = dtype
        return state

    @staticmethod
    def _set(ref, place):
        ref.region, ref.offset = place

    def _inline_lengths(self, state, lengths):
        array = _ref_request.int32_lengths(lengths)
        state.lengths = array  # alive for the call
        request = state.request
        request.lengths = array.__array_interface__["data"][0] if array.size else None
        request.num_lengths = array.size
        request.lengths_ref.region = None

    def _no_inline_lengths(self, state):
        state.lengths = None
        state.request.lengths = None
        state.request.num_lengths = 0

    _TORCH_TYPES = None  # torch dtype -> wire type, made on first use (torch is optional)

    def _select_torch(self, common, scores, lengths, k, out, values, ordering):
        import torch
        if ZeroCopyClient._TORCH_TYPES is None:
            ZeroCopyClient._TORCH_TYPES = {torch.float32: topk_pb2.SCORE_TYPE_FP32,
                                           torch.bfloat16: topk_pb2.SCORE_TYPE_BF16,
                                           torch.float16: topk_pb2.SCORE_TYPE_FP16}
        state = self._call_state(common, _checks.score_type(scores, ZeroCopyClient._TORCH_TYPES))
        request = state.request
        device = scores.device
        self._set(request.scores, self._cuda_place(scores, "scores"))
        request.row_pitch = scores.stride(0)
        if isinstance(lengths, torch.Tensor) and lengths.is_cuda:
            _checks.check_device_lengths(lengths, device, torch.int32)
            self._set(request.lengths_ref, self._cuda_place(lengths, "lengths"))
            self._no_inline_lengths(state)
            request.width = scores.shape[1]
        else:
            self._inline_lengths(state, lengths)
            request.width = 0
        if out is None:
            out = torch.empty((scores.shape[0], k), dtype=torch.int32, device=device)
        _checks.check_outputs(scores, k, out, values, torch.int32)
        self._set(request.out_indices, self._cuda_place(out, "out"))
        request.out_row_stride = out.stride(0)
        if values is not None:
            _checks.check_values_stride(out, values)
            self._set(request.out_values, self._cuda_place(values, "values"))
        else:
            request.out_values.region = None
        stream = torch.cuda.current_stream(device)
        if ordering == "event":
            ready, done = self._ordering_events(device.index)
            ready.record(stream)
            request.wait_event = f"ready{device.index}".encode()
            request.record_event = f"done{device.index}".encode()
        else:
            stream.synchronize()
            request.wait_event = request.record_event = None
        self._send(state, in_reply=False)
        if ordering == "event":
            stream.wait_event(done)
        return out

    def _select_numpy(self, common, scores, lengths, k, out, values, dtype):
        if scores.dtype == np.float32 and dtype in (None, "fp32"):
            wire = topk_pb2.SCORE_TYPE_FP32
        elif scores.dtype == np.float16 and dtype in (None, "fp16"):
            wire = topk_pb2.SCORE_TYPE_FP16
        elif scores.dtype == np.uint16 and dtype in ("bf16", "fp16"):
            wire = topk_pb2.SCORE_TYPE_BF16 if dtype == "bf16" else topk_pb2.SCORE_TYPE_FP16
        else:
            raise RegionError("scores: float32, float16, or uint16 with dtype='bf16' or 'fp16'")
        if values is not None and values.itemsize != scores.itemsize:
            raise RegionError(f"values: {scores.itemsize}-byte elements, the scores' type")
        state = self._call_state(common, wire)
        request = state.request
        region, offset = self._host_place(scores, "scores")
        self._set(request.scores, (region.cname, offset))
        request.row_pitch = scores.strides[0] // scores.itemsize
        request.width = 0
        place = self._host_find(lengths) if isinstance(lengths, np.ndarray) else None
        if place is not None:
            if not lengths.flags.c_contiguous:  # a strided view: its copy is not shared
                place = self._host_place(np.ascontiguousarray(lengths), "lengths")
            self._set(request.lengths_ref, (place[0].cname, place[1]))
            self._no_inline_lengths(state)
        else:
            self._inline_lengths(state, lengths)
        request.wait_event = request.record_event = None
        request.out_values.region = None
        if out is None:
            if values is not None:
                raise RegionError("values: give out as well (or neither)")
            request.out_indices.region = None
            request.out_row_stride = 0
            return self._send(state, in_reply=True)
        region, offset = self._host_place(out, "out")
        self._set(request.out_indices, (region.cname, offset))
        request.out_row_stride = out.strides[0] // 4
        if values is not None:
            region, offset = self._host_place(values, "values")
            self._set(request.out_values, (region.cname, offset))
        self._send(state, in_reply=False)
        return out

    def _send(self, state, in_reply: bool):
        """Sends the call `state` describes; with in_reply, returns the
        indices the reply carries."""
        if self._core is not None:
            indices = None
            if in_reply:
                request, answer = state.request, state.answer
                indices = np.empty((request.num_rows, max(request.k, 0)), dtype=np.int32)
                answer.indices = indices.__array_interface__["data"][0]
                answer.values = None
                answer.capacity = indices.size
            self._core.select(state, in_reply)
            return indices
        request = _ref_request.to_proto(state.request, state.lengths, self.session.id)
        if self._pipeline is not None:
            response = self._pipeline.call(request)
        else:
            response = self.client._stub.Select(request)
        return _decode(response).indices if in_reply else None

