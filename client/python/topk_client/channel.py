"""GPU-ordered Top-K channels (OpenChannel; proto/topk/channel/control_block.h).

A channel fixes K, the score type, the options and the caps (max_rows,
max_width) once; a call then costs no RPC and no host round trip: the
caller's CUDA stream writes the call's descriptor into a shared-memory
control block the server polls, writes ready = 1, waits until the server
writes done = 1, and writes done = 0. Those four steps are ONE
cuStreamBatchMemOp of constant addresses and values patched in place, so a
call can be captured in a CUDA graph and replayed.

    from topk_client import ZeroCopyClient
    with ZeroCopyClient("unix:/run/topk.sock") as topk:
        ch = topk.channel(k=2048, max_rows=64, max_width=131072)
        ch.select(scores, lengths, out=indices)   # enqueued on the current stream
        ch.check()                                # sync + raise a refused call

The tensors are regions of the ZeroCopyClient's session (CUDA IPC); the
channel names the regions it needs and is reopened (outside a CUDA graph
capture) when a call names a new one, up to 8: keep static buffers and pass
views of them. A refused call writes nothing into its outputs; its status
stays in the control block until the next call: status() reads it,
check() synchronises the stream first and raises it.

A channel serves one call at a time (its hand-off words are a binary
semaphore): calls from two streams must be ordered (wait_stream), or made
on two channels. One thread at a time per channel. A CUDA graph that
captured a call holds the control block's addresses: replay it only while
the channel is open. torch is imported on first use only, so that
importing topk_client needs no torch.
"""

import time
from typing import Dict, Optional, Sequence, Tuple

import grpc

from topk_client._channel_block import (  # noqa: F401 (public names re-exported)
    CONTROL_BYTES, ChannelError, LAYOUT_VERSION, MAX_REGIONS, NO_REGION, STATUS_BAD_INDICES,
    STATUS_BAD_LENGTH, STATUS_BAD_LENGTHS, STATUS_BAD_NUM_ROWS, STATUS_BAD_REGION,
    STATUS_BAD_ROW_PITCH, STATUS_BAD_ROW_STRIDE, STATUS_BAD_SCORES, STATUS_BAD_VALUES,
    STATUS_CLOSED, STATUS_DEVICE_ERROR, STATUS_MISALIGNED, STATUS_NAN, STATUS_OK, STATUS_OVERLAP,
    _CUDA_ERROR_INVALID_CONTEXT, _CUDA_ERROR_NOT_READY,
    _CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, _Context, _ControlBlock, _DESC_WORDS,
    _Driver, _OPS, _OP_WORDS, _U64, pack_descriptor, unpack_descriptor, STATUS_FIELDS,
    STATUS_NAMES)
from topk_client.client import topk_pb2
from topk_client._checks import RegionError
from topk_client._region_cache import _RegionCache


# --- the channel -------------------------------------------------------------------

class Channel:
    """A channel of a ZeroCopyClient's session: made by ZeroCopyClient.channel();
    opened on the first select with the regions it names."""

    # How long close() waits for the channel's calls before it answers them
    # itself (a server that died leaves the stream waiting on `done`).
    drain_timeout_s = 10.0

    def __init__(self, zc, k: int, max_rows: int, max_width: int, *, dtype=None,
                 sorted: bool = False, deterministic: bool = False, return_values: bool = False):
        import torch
        self._torch = torch
        dtype = torch.float32 if dtype is None else dtype
        types = {torch.float32: topk_pb2.SCORE_TYPE_FP32, torch.bfloat16: topk_pb2.SCORE_TYPE_BF16,
                 torch.float16: topk_pb2.SCORE_TYPE_FP16}
        if dtype not in types:
            raise ValueError("dtype: torch.float32, torch.bfloat16 or torch.float16")
        if k < 1 or max_rows < 1 or max_width < 1:
            raise ValueError("k, max_rows and max_width must be >= 1")
        self._zc = zc
        self.k, self.max_rows, self.max_width = int(k), int(max_rows), int(max_width)
        self.dtype = dtype
        self.sorted, self.deterministic, self.return_values = sorted, deterministic, return_values
        self._wire = types[dtype]
        self._element = torch.empty((), dtype=dtype).element_size()
        self._cache = _RegionCache(zc)
        self._device: Optional[int] = None   # the CUDA ordinal, from the first call
        self._context: Optional[_Context] = None
        self._driver: Optional[_Driver] = None
        self._block: Optional[_ControlBlock] = None
        self._ops = None
        self._regions: Tuple[str, ...] = ()
        self._index: Dict[str, int] = {}
        self._streams = set()     # raw handles of the streams that made calls
        self._captured = False    # a call went into a CUDA graph: the block cannot move
        self._closed = False
        self.channel_id = ""
        self.plan = ""
        self.server_device = -1
        self._raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda device: torch.cuda.current_stream(device).cuda_stream)
        self._is_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or \
            torch.cuda.is_current_stream_capturing
        self._current_device = getattr(torch._C, "_cuda_getDevice", None) or \
            torch.cuda.current_device

    @property
    def regions(self) -> Tuple[str, ...]:
        """The session's region names the open channel serves (a descriptor's
        region fields index this)."""
        return self._regions

    # --- calls ----------------------------------------------------------------

    def select(self, scores, lengths, out=None, values=None, check: bool = False):
        """Enqueues the top-k of every row of `scores` (M, N) on the current
        CUDA stream: row r's valid prefix is lengths[r] long (0 <= lengths[r]
        <= N). scores: a CUDA tensor of the channel's dtype with contiguous
        rows, M <= max_rows, N <= max_width; lengths: an int32 CUDA tensor on
        the same GPU (the server reads lengths on the device only); out: (M,
        >= k) int32 with contiguous rows, written in place (None: a new one);
        values: likewise in the scores' type, exactly when the channel returns
        values. Rows beyond min(k, lengths[r]) get index -1. Returns out; its
        contents are ready on the stream once the call's wait completes.
        check=True also synchronises and raises a refused call (check())."""
        m = self._check_scores(scores)
        self._check_lengths(lengths, scores, m)
        if out is None:
            out = self._torch.empty((m, self.k), dtype=self._torch.int32, device=scores.device)
        self._check_output("out", out, self._torch.int32, scores, m)
        if values is not None or self.return_values:
            self._check_values(values, out, scores, m)
        if m == 0:
            return out
        capturing = self._is_capturing()
        self._enqueue(self._descriptor(scores, lengths, out, values, m, capturing), capturing)
        if check:
            self.check()
        return out

    def _raw_call(self, words: Sequence[int]):
        """Test aid: enqueues one call with an arbitrary descriptor (9 words,
        pack_descriptor) on the current stream of the channel's GPU, unchecked
        here (the server's checks are what it exercises). The channel must be
        open (one select first)."""
        if self._block is None:
            raise RuntimeError("_raw_call: the channel is not open: make one select first")
        if len(words) != _DESC_WORDS:
            raise ValueError(f"_raw_call: {_DESC_WORDS} descriptor words")
        self._enqueue(tuple(int(w) & _U64 for w in words), self._is_capturing())

    def _descriptor_of(self, scores, lengths, out, values=None) -> Tuple[int, ...]:
        """Test aid: the descriptor select() would write for these tensors
        (opening or widening the channel as select() would)."""
        return self._descriptor(scores, lengths, out, values, scores.shape[0],
                                self._is_capturing())

    def status(self) -> Optional[ChannelError]:
        """The last answered call's status, read from the control block
        without synchronising: None when it succeeded (or none was made), else
        its ChannelError. Only final once the call's stream has passed it."""
        if self._block is None:
            return None
        status, row, value = self._block.read_status()
        return None if status == STATUS_OK else ChannelError(status, row, value)

    def counters(self) -> Tuple[int, int]:
        """(calls answered, of which refused) since the channel opened, as the
        server last wrote them; (0, 0) before the first call."""
        return self._block.counters() if self._block is not None else (0, 0)

    def check(self, timeout_s: float = 60.0):
        """Synchronises the current stream of the channel's GPU and raises the
        ChannelError of the last call, if it was refused. Only the last call's
        status is kept: check after each call whose refusal matters (or
        compare counters())."""
        if self._block is None:
            return  # never called, or closed
        if self._is_capturing():
            raise RegionError("check: not inside a CUDA graph capture (it synchronises the "
                              "stream); check after replaying the graph")
        self._wait_stream(self._raw_stream(self._device), timeout_s, release=False)
        error = self.status()
        if error is not None:
            raise error

    # --- argument checks (ZeroCopyClient._select_torch's, plus the caps) --------

    def _check_scores(self, scores) -> int:
        torch = self._torch
        if not isinstance(scores, torch.Tensor) or scores.dim() != 2 or scores.stride(1) != 1:
            raise RegionError("scores: a 2-D array with contiguous rows")
        if not scores.is_cuda or scores.dtype is not self.dtype:
            raise RegionError(f"scores: a {self.dtype} CUDA tensor (the channel's dtype)")
        m, n = scores.shape
        if m > self.max_rows:
            raise RegionError(f"scores: {m} rows exceed the channel's max_rows = {self.max_rows}")
        if n > self.max_width:
            raise RegionError(f"scores: rows of {n} exceed the channel's max_width = "
                              f"{self.max_width}")
        device = scores.get_device()
        if self._device is not None and device != self._device:
            raise RegionError(f"scores: on cuda:{device}, but this channel serves "
                              f"cuda:{self._device}")
        return m

    def _check_lengths(self, lengths, scores, m: int):
        torch = self._torch
        if not isinstance(lengths, torch.Tensor) or not lengths.is_cuda:
            raise RegionError("lengths: an int32 CUDA tensor on the scores' GPU (a channel "
                              "reads lengths on the device only)")
        if lengths.dtype is not torch.int32 or lengths.get_device() != scores.get_device() \
                or not lengths.is_contiguous():
            raise RegionError("lengths: a contiguous int32 tensor on the scores' GPU")
        if lengths.numel() < m:
            raise RegionError(f"lengths: {lengths.numel()} entries for {m} rows")

    def _check_output(self, name, t, dtype, scores, m):
        torch = self._torch
        if not isinstance(t, torch.Tensor) or not t.is_cuda or t.dim() != 2 \
                or t.get_device() != scores.get_device() or t.dtype is not dtype \
                or t.stride(1) != 1 or t.shape[1] < self.k or t.shape[0] != m:
            raise RegionError(f"{name}: ({m}, >= {self.k}) {dtype} on {scores.device} "
                              "with contiguous rows")

    def _check_values(self, values, out, scores, m):
        if not self.return_values:
            raise RegionError("values: this channel was opened without return_values")
        if values is None:
            raise RegionError("values: this channel returns values: pass values=, "
                              f"(M, >= {self.k}) of the scores' type")
        self._check_output("values", values, self.dtype, scores, m)
        if m > 1 and values.stride(0) != out.stride(0):
            raise RegionError("values: must have the same row stride as out")

    # --- descriptor and enqueue --------------------------------------------------

    def _descriptor(self, scores, lengths, out, values, m: int,
                    capturing: bool) -> Tuple[int, ...]:
        parts = [(scores, "scores"), (lengths, "lengths"), (out, "out")]
        if values is not None:
            parts.append((values, "values"))
        if self._device is None:
            self._device = scores.get_device()
        located = [self._cache.lookup(t, what, capturing) for t, what in parts]
        index = self._index
        for name, _ in located:
            if name not in index:
                self._widen([name for name, _ in located], capturing)
                index = self._index
                break
        # One row: its pitch is meaningless (the server checks it only with
        # more rows) and torch may report any stride for a size-1 dim, so
        # both are normalised: the row's own width, and K.
        row_pitch = scores.stride(0) if m > 1 else scores.shape[1]
        out_row_stride = out.stride(0) if m > 1 else 0
        values_region, values_offset = NO_REGION, 0
        if values is not None:
            values_region, values_offset = index[located[3][0]], located[3][1]
        return pack_descriptor(
            num_rows=m, scores_region=index[located[0][0]], lengths_region=index[located[1][0]],
            indices_region=index[located[2][0]], values_region=values_region,
            scores_offset=located[0][1], row_pitch=row_pitch, lengths_offset=located[1][1],
            indices_offset=located[2][1], values_offset=values_offset,
            out_row_stride=out_row_stride)

    def _enqueue(self, words: Tuple[int, ...], capturing: bool):
        ops = self._ops
        ops[2:_DESC_WORDS * _OP_WORDS:_OP_WORDS] = words  # the 9 descriptor values
        device = self._device
        stream = self._raw_stream(device)
        rc = self._submit(stream, ops, device)
        if rc != 0:
            self._driver.check(rc, "cuStreamBatchMemOp (a channel call)")
        if capturing:
            self._captured = True  # the graph holds the block's addresses from now on
        elif stream not in self._streams:
            self._streams.add(stream)  # close() and a reopen wait for it

    def _submit(self, stream: int, ops, device: int) -> int:
        driver = self._driver
        if stream == 0 and self._current_device() != device:
            # The legacy default stream is the current context's: make the
            # channel's GPU current for this one call.
            with self._context:
                return driver.batch_mem_op(stream, _OPS, ops, 0)
        rc = driver.batch_mem_op(stream, _OPS, ops, 0)
        if rc == _CUDA_ERROR_INVALID_CONTEXT:
            # A thread that never made a CUDA runtime call has no current
            # context: give it the primary one, as the runtime would.
            driver.check(driver.ctx_set(self._context.handle), "cuCtxSetCurrent")
            rc = driver.batch_mem_op(stream, _OPS, ops, 0)
        return rc

    # --- opening, widening, closing -------------------------------------------------

    def _widen(self, names: Sequence[str], capturing: bool):
        """Opens the channel with the regions a call needs (the ones it had
        first, so earlier indices stay valid), reopening it if it was open."""
        wanted = list(self._regions)
        for name in names:
            if name not in wanted:
                wanted.append(name)
        if len(wanted) > MAX_REGIONS:
            raise RegionError(f"a channel names at most {MAX_REGIONS} regions, and this call "
                              f"would make {len(wanted)}: reuse static buffers (allocate scores, "
                              "lengths and outputs once; pass views of them)")
        if capturing:
            raise RegionError("a tensor in a region this channel was not opened with, inside a "
                              "CUDA graph capture: warm up first (one select with the same "
                              "buffers before capturing)")
        if self._captured:
            raise RegionError("this channel's calls are in a captured CUDA graph, which holds its "
                              "control block: it cannot reopen with new regions; open another "
                              "channel (or reuse the buffers the graph uses)")
        if self._block is not None:
            self._shutdown()
        self._open(wanted)

    def _open(self, regions: Sequence[str]):
        if self._closed:
            raise RuntimeError("channel: closed")
        if self._context is None:
            self._driver = _Driver.get()
            self._context = _Context(self._driver, self._device)
            if not self._context.attribute(_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS):
                raise RuntimeError(f"cuda:{self._device}: no 64-bit stream memory operations, "
                                   "which a channel call writes its descriptor with")
        request = topk_pb2.OpenChannelRequest(
            session_id=self._zc.session.id, k=self.k, dtype=self._wire, max_rows=self.max_rows,
            max_width=self.max_width, regions=list(regions),
            options=topk_pb2.SelectOptions(sorted=self.sorted, deterministic=self.deterministic,
                                           return_values=self.return_values))
        response = self._zc.client._stub.OpenChannel(request)
        try:
            if response.layout_version != LAYOUT_VERSION or response.control_bytes < CONTROL_BYTES:
                raise RuntimeError(
                    f"OpenChannel: control block layout {response.layout_version} of "
                    f"{response.control_bytes} bytes; this client speaks layout {LAYOUT_VERSION} "
                    f"of {CONTROL_BYTES}")
            block = _ControlBlock(response.control_shm_name, self._context, self._driver)
        except Exception:
            self._close_rpc(response.channel_id)
            raise
        self._block, self._ops = block, block.mem_ops()
        self._regions = tuple(regions)
        self._index = {name: i for i, name in enumerate(regions)}
        self.channel_id, self.plan = response.channel_id, response.plan
        self.server_device = response.device_ordinal

    def _shutdown(self) -> Tuple[int, int]:
        """Lets the channel's calls finish (answering them itself past
        drain_timeout_s), closes it on the server and unmaps the block.
        Returns the server's (calls, errors)."""
        for stream in list(self._streams):
            self._wait_stream(stream, self.drain_timeout_s, release=True)
        self._streams.clear()
        answered = self._close_rpc(self.channel_id)
        self._block.close(self._context)
        self._block, self._ops = None, None
        self._regions, self._index = (), {}
        return answered

    def _close_rpc(self, channel_id: str) -> Tuple[int, int]:
        try:
            response = self._zc.client._stub.CloseChannel(topk_pb2.CloseChannelRequest(
                session_id=self._zc.session.id, channel_id=channel_id))
            return response.calls, response.errors
        except grpc.RpcError:
            return (-1, -1)  # the server (or the session) is gone: nothing left to close there

    def _wait_stream(self, stream: int, timeout_s: float, release: bool):
        """Polls the stream until it is idle (spinning a little first: a call
        answers in tens of microseconds). Past the timeout: with release, the
        control block is answered here (status CLOSED) until the stream is
        idle; without, TimeoutError."""
        driver = self._driver
        deadline = time.monotonic() + timeout_s
        spin_until = time.monotonic() + 0.002
        with self._context:
            while True:
                rc = driver.stream_query(stream)
                if rc == 0:
                    return
                if rc != _CUDA_ERROR_NOT_READY:
                    driver.check(rc, "cuStreamQuery (waiting for the channel's calls)")
                now = time.monotonic()
                if now > deadline:
                    if not release:
                        raise TimeoutError(
                            f"channel: the stream has not finished in {timeout_s} s; a server "
                            "that stopped answering leaves it waiting (close() releases it)")
                    self._block.release_waiter()
                if now > spin_until:
                    time.sleep(0.0001)

    def close(self) -> Tuple[int, int]:
        """Waits for the channel's calls, closes it on the server (CloseChannel),
        unregisters and unmaps the control block. A CUDA graph that captured a
        call must not be replayed after this (its operations address the
        block). Returns the server's (calls, errors), (0, 0) if never opened,
        (-1, -1) if the server could not be asked."""
        if self._closed:
            return (0, 0)
        answered = (0, 0)
        try:
            if self._block is not None:
                answered = self._shutdown()
        finally:
            self._closed = True
            if self._context is not None:
                self._context.release()
                self._context = None
            channels = getattr(self._zc, "_channels", None)
            if channels is not None and self in channels:
                channels.remove(self)
        return answered

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
