"""Top-K selection inside this process, on the caller's GPU and stream:
libtopk_c.so (kernels/include/topk/topk_c.h) through ctypes, on torch CUDA
tensors. No server, no copy, no host synchronisation.

    from topk_client import InProcessSelector
    topk = InProcessSelector()                       # finds libtopk_c.so (below)
    indices = topk.select(scores, lengths, k=2048)   # scores: (M, N) CUDA tensor
    topk.select(scores, lengths, k=2048, out=indices)

Where libtopk_c.so is looked for, in this order (the first that applies
decides; an explicit path or TOPK_LIBRARY that does not load is an error,
not a reason to look elsewhere):
  1. the `library` argument (a path);
  2. the environment variable TOPK_LIBRARY (a path);
  3. this package's own folder (topk_client/libtopk_c.so);
  4. lib/ and lib64/ of each CMake install prefix in TOPK_PREFIX, then in
     CMAKE_PREFIX_PATH (both ':'-separated; `cmake --install build --prefix
     /opt/topk` puts it in /opt/topk/lib), then /usr/local.

Plans are cached per shape bucket (device, k, M rounded up to a power of
two, N rounded up to a power of two, dtype, sorted, deterministic, layout)
and each plan keeps its workspace, index scratch and row-status buffers
(torch tensors on its device); a call whose exact shape was seen before
finds its plan with one dictionary lookup, so that the host cost of a call
stays near the C ABI's own (bench/frontend/op_overhead_bench.py measures it). select() runs on torch.cuda.current_stream() and
never waits for the GPU (unless check=True), so it can be captured in a
torch CUDA graph: call it once with the same shapes before capturing, so
that planning and every allocation happen outside the capture, then
capture and replay. One selector's buffers serve one stream at a time: use
one InProcessSelector per stream that selects concurrently.

Rows whose valid prefix holds a NaN (or whose length is outside [0, N]) come
back as rows of -1 with a status (1: NaN, 2: bad length) in row_status;
check=True synchronises the stream and raises ValueError naming those rows.
"""

import ctypes
import os
import threading
from typing import Optional

from topk_client import _checks, _library
from topk_client._checks import RegionError  # noqa: F401  (the error type of both paths)

_LIBRARY_NAME = "libtopk_c.so"
_API_VERSION = 2  # topk_plan_create_v2 / topk_select_v2

# topk_c.h's codes.
_OK, _INVALID_ARGUMENT, _NO_DEVICE, _DEVICE, _INTERNAL, _UNIMPLEMENTED = range(6)
_DTYPE_FP32, _DTYPE_BF16, _DTYPE_FP16 = 0, 1, 2
_OPT_SORTED, _OPT_DETERMINISTIC = 1, 2
_LAYOUT_PITCHED, _LAYOUT_PACKED = 0, 1
_ROW_REASONS = {1: "NaN in its valid prefix", 2: "length outside [0, N]"}


def library_candidates(library: Optional[str] = None) -> list:
    """The paths load_library tries, in order (see the module docstring)."""
    return _library.candidates(_LIBRARY_NAME, "TOPK_LIBRARY", library)


def load_library(library: Optional[str] = None) -> ctypes.CDLL:
    """libtopk_c.so loaded, its functions typed; RuntimeError when none of
    the candidates is there or the one found is not the C ABI (version 2+)."""
    candidates = library_candidates(library)
    explicit = _library.explicit("TOPK_LIBRARY", library)
    path = next((p for p in candidates if os.path.isfile(p)), None)
    if path is None:
        how = "the path given" if library else "TOPK_LIBRARY" if explicit else "looked in"
        raise RuntimeError(f"{_LIBRARY_NAME} not found: {how} {', '.join(candidates)} (build it "
                           "with the CUDA backend: target topk_c; or set TOPK_LIBRARY)")
    lib, version = _library.open_library(path, "libtopk_c", "topk_api_version")
    if version < _API_VERSION:
        raise RuntimeError(f"{path}: C ABI version {version}, this client needs "
                           f"{_API_VERSION} (score types)")
    c = ctypes
    lib.topk_plan_create_v2.argtypes = [c.c_int, c.c_int32, c.c_int64, c.c_int64, c.c_int,
                                        c.c_int, c.c_uint, c.POINTER(c.c_void_p)]
    lib.topk_plan_create_v2.restype = c.c_int
    lib.topk_plan_destroy.argtypes = [c.c_void_p]
    lib.topk_plan_destroy.restype = None
    lib.topk_plan_workspace_bytes.argtypes = [c.c_void_p]
    lib.topk_plan_workspace_bytes.restype = c.c_size_t
    lib.topk_plan_explain.argtypes = [c.c_void_p]
    lib.topk_plan_explain.restype = c.c_char_p
    lib.topk_select_v2.argtypes = [c.c_void_p, c.c_void_p, c.c_int64, c.c_void_p, c.c_void_p,
                                   c.c_int64, c.c_int64, c.c_void_p, c.c_void_p, c.c_void_p,
                                   c.c_size_t, c.c_void_p]
    lib.topk_select_v2.restype = c.c_int
    lib.topk_last_error.argtypes = []
    lib.topk_last_error.restype = c.c_char_p
    return lib


def round_up_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def plan_bucket(device: int, k: int, m: int, n: int, dtype: int, sorted: bool,
                deterministic: bool, layout: int = _LAYOUT_PITCHED) -> tuple:
    """The plan cache's key: every (M, N) up to the bucket's shares a plan.
    The layout (pitched rows, or packed rows at per-row offsets) is last and
    left out for pitched plans, the common case."""
    bucket = (device, int(k), round_up_pow2(m), round_up_pow2(n), dtype, bool(sorted),
              bool(deterministic))
    return bucket if layout == _LAYOUT_PITCHED else bucket + (layout,)


def _error(lib, call: str, code: int) -> Exception:
    message = f"{call}: {lib.topk_last_error().decode(errors='replace')}"
    if code == _INVALID_ARGUMENT:
        return ValueError(message)
    if code == _UNIMPLEMENTED:
        return NotImplementedError(message)
    return RuntimeError(message)


class _Plan:
    """A plan and the buffers it owns on its device (allocated once)."""

    def __init__(self, torch, lib, key):
        device, k, max_rows, max_width, dtype, sorted_, deterministic = key[:7]
        layout = key[7] if len(key) > 7 else _LAYOUT_PITCHED
        options = (_OPT_SORTED if sorted_ else 0) | (_OPT_DETERMINISTIC if deterministic else 0)
        handle = ctypes.c_void_p()
        code = lib.topk_plan_create_v2(device, k, max_rows, max_width, layout, dtype,
                                       options, ctypes.byref(handle))
        if code != _OK:
            raise _error(lib, "topk_plan_create_v2", code)
        self._lib = lib
        self.handle = handle
        self.k = k
        self.workspace_bytes = lib.topk_plan_workspace_bytes(handle)
        where = torch.device("cuda", device)
        self.workspace = torch.empty(max(self.workspace_bytes, 1), dtype=torch.uint8,
                                     device=where)
        # For outputs whose row stride is not k (the ABI writes k per row).
        self.indices = torch.empty((max_rows, k), dtype=torch.int32, device=where)
        self.row_status = torch.empty(max_rows, dtype=torch.uint8, device=where)
        # The arguments of topk_select_v2 that a call does not change.
        self.fixed = (self.handle, self.workspace.data_ptr(), self.workspace_bytes)

    def explain(self) -> str:
        return self._lib.topk_plan_explain(self.handle).decode()

    def close(self):
        if getattr(self, "handle", None):
            self._lib.topk_plan_destroy(self.handle)
            self.handle = None
        self.workspace = self.indices = self.row_status = None

    def __del__(self):
        self.close()


def _raw_stream_function(torch):
    """device index -> the raw cudaStream_t of torch's current stream there.
    torch's own C entry when it has one (what its compiled code calls: no
    Stream object per call), else the public, slower path."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


class InProcessSelector:
    """Exact Top-K of torch CUDA tensors in this process (module docstring)."""

    def __init__(self, library: Optional[str] = None):
        try:
            import torch
        except ImportError as e:
            raise ImportError("InProcessSelector needs torch with CUDA (pip install torch); "
                              "without a GPU use TopKClient or ZeroCopyClient against a "
                              "topk-server") from e
        if not torch.cuda.is_available():
            raise RuntimeError("InProcessSelector: no CUDA device (torch.cuda.is_available() "
                               "is False); without a GPU use TopKClient or ZeroCopyClient "
                               "against a topk-server (CPU backend)")
        self._torch = torch
        self._lib = load_library(library)
        self._select = self._lib.topk_select_v2
        self._stream = _raw_stream_function(torch)
        self._types = {torch.float32: _DTYPE_FP32, torch.bfloat16: _DTYPE_BF16,
                       torch.float16: _DTYPE_FP16}
        self._plans = {}     # plan_bucket(...) -> _Plan
        self._by_shape = {}  # the exact call shape -> its bucket's _Plan (the hot path)
        self._lock = threading.Lock()

    def close(self):
        """Frees every plan and its buffers, once the GPU is done with them
        (it synchronises each plan's device); a later select plans again."""
        with self._lock:
            plans, self._plans, self._by_shape = self._plans, {}, {}
        for key, plan in plans.items():
            self._torch.cuda.synchronize(key[0])
            plan.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def plan(self, key: tuple) -> _Plan:
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = _Plan(self._torch, self._lib, key)
                self._plans[key] = plan
            return plan

    def plan_for(self, device: int, k: int, m: int, n: int, dtype: int, sorted: bool = False,
                 deterministic: bool = False, layout: int = _LAYOUT_PITCHED) -> _Plan:
        """The plan (and its buffers) that serves this exact shape: a
        dictionary lookup once the shape has been seen."""
        shape = (device, k, m, n, dtype, sorted, deterministic, layout)
        plan = self._by_shape.get(shape)
        if plan is None:
            plan = self.plan(plan_bucket(device, k, m, n, dtype, sorted, deterministic, layout))
            self._by_shape[shape] = plan
        return plan

    def select(self, scores, lengths, k: int, *, out=None, values=None, sorted: bool = False,
               deterministic: bool = False, row_status=None, check: bool = False,
               row_offsets=None):
        """Top-k indices of every row of the 2-D padded `scores` (M, N), row
        r's valid prefix being lengths[r] long (the rest is never read).

        scores: a float32, bfloat16 or float16 CUDA tensor with contiguous
        rows and any row stride. lengths: M int32 on the scores' GPU
        (contiguous). out: (M, >=k) int32 on that GPU with contiguous rows,
        written in place; None: a new (M, k) tensor. values: like out, of
        the scores' dtype, to also get the selected values (NaN where the
        index is -1). row_status: an (M,) uint8 tensor on that GPU to get
        each row's status (0 ok, 1 NaN, 2 bad length). check: synchronise
        and raise ValueError naming the rows that failed.
        row_offsets: (M,) int64 on that GPU (contiguous): row r starts
        row_offsets[r] elements after scores' first element instead of at
        r * scores.stride(0) (the C ABI's packed layout: a window of a
        longer row, without a copy); lengths[r] <= N still, and the window
        must lie inside scores' memory (not checked: that would read the
        offsets back). Indices count from the row's start either way.
        Errors are those of ZeroCopyClient.select (RegionError, same
        messages) plus ValueError for k and lengths' size.
        Returns out (or the new indices)."""
        if values is None and row_status is None and row_offsets is None and not check:
            direct = self._direct_call(scores, lengths, k, out, sorted, deterministic)
            if direct is not None:
                out, args = direct
                code = self._select(*args)
                if code != _OK:
                    raise _error(self._lib, "topk_select_v2", code)
                return out
        torch = self._torch
        _checks.check_rows(scores)
        dtype = _checks.score_type(scores, self._types)
        device = scores.device
        m, n = scores.shape
        if not (isinstance(lengths, torch.Tensor) and lengths.is_cuda):
            raise RegionError(_checks.LENGTHS_DEVICE)
        _checks.check_device_lengths(lengths, device, torch.int32)
        if lengths.numel() != m:
            raise ValueError(f"lengths: {lengths.numel()} entries for {m} rows of scores")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k = {k}: must be a positive int")
        if out is None:
            out = torch.empty((m, k), dtype=torch.int32, device=device)
        _checks.check_outputs(scores, k, out, values, torch.int32)
        _checks.check_values_stride(out, values)
        if row_status is not None and (row_status.device != device or
                                       row_status.dtype != torch.uint8 or
                                       row_status.numel() != m or
                                       not row_status.is_contiguous()):
            raise RegionError(f"row_status: ({m},) contiguous uint8 on {device}")
        layout, offsets = _LAYOUT_PITCHED, None
        if row_offsets is not None:
            if (row_offsets.device != device or row_offsets.dtype != torch.int64 or
                    row_offsets.numel() != m or not row_offsets.is_contiguous()):
                raise RegionError(f"row_offsets: ({m},) contiguous int64 on {device}")
            layout, offsets = _LAYOUT_PACKED, row_offsets.data_ptr()
        if m == 0:
            return out
        index = device.index
        plan = self.plan_for(index, k, m, n, dtype, sorted, deterministic, layout)
        direct = out.stride(0) == k
        indices = out if direct else plan.indices
        status = row_status if row_status is not None else plan.row_status
        # A lone row's stride says nothing (torch keeps any for a size-1 dim).
        pitch = scores.stride(0) if m > 1 else n
        handle, workspace, workspace_bytes = plan.fixed
        code = self._select(handle, scores.data_ptr(), pitch, offsets, lengths.data_ptr(), m, n,
                            indices.data_ptr(), status.data_ptr(), workspace, workspace_bytes,
                            self._stream(index))
        if code != _OK:
            raise _error(self._lib, "topk_select_v2", code)
        if not direct:
            out[:, :k].copy_(indices[:m])
        if values is not None:
            chosen = out[:, :k]
            picked = torch.gather(scores, 1, chosen.clamp(min=0).long())
            values[:, :k].copy_(picked.masked_fill(chosen < 0, float("nan")))
        if check:
            self._raise_failed_rows(status, m, index)
        return out

    def _direct_call(self, scores, lengths, k, out, sorted, deterministic):
        """(out, topk_select_v2's arguments) for the common call, whose every
        argument is plainly valid: plain tensors, one row-stride read per
        tensor, out (M, k) written directly (made here when None), a plan
        already made for this exact shape. None sends the call to the
        general path, which checks each argument in turn and names what is
        wrong; so this one only has to be right when it says yes. It keeps
        a call's host cost near the C ABI's own."""
        torch = self._torch
        tensor, int32 = torch.Tensor, torch.int32
        if (type(scores) is not tensor or type(lengths) is not tensor or type(k) is not int
                or lengths.dtype is not int32 or not scores.is_cuda):
            return None
        dtype = self._types.get(scores.dtype)
        shape = scores.shape
        if dtype is None or len(shape) != 2 or shape[0] < 1 or lengths.shape != shape[:1]:
            return None
        m, n = shape
        pitch, unit = scores.stride()
        lone = m == 1  # a size-1 dimension's stride says nothing (torch keeps any)
        device = scores.device
        if unit != 1 or not (lone or lengths.stride() == (1,)) or lengths.device != device:
            return None
        plan = self._by_shape.get((device.index, k, m, n, dtype, sorted, deterministic,
                                   _LAYOUT_PITCHED))
        if plan is None:
            return None
        if out is None:
            out = torch.empty((m, k), dtype=int32, device=device)
        elif (type(out) is not tensor or out.dtype is not int32 or out.shape != (m, k)
              or out.stride()[lone:] != (k, 1)[lone:] or out.device != device):
            return None
        handle, workspace, workspace_bytes = plan.fixed
        return out, (handle, scores.data_ptr(), n if lone else pitch, None, lengths.data_ptr(),
                     m, n, out.data_ptr(), plan.row_status.data_ptr(), workspace,
                     workspace_bytes, self._stream(device.index))

    def _raise_failed_rows(self, status, m: int, device: int):
        """check=True: waits for the stream, then names the rows that failed."""
        torch = self._torch
        torch.cuda.current_stream(device).synchronize()
        failed = torch.nonzero(status[:m]).flatten().tolist()
        if failed:
            codes = status[:m].tolist()
            shown = ", ".join(f"row {r} ({_ROW_REASONS.get(codes[r], codes[r])})"
                              for r in failed[:8])
            more = f" and {len(failed) - 8} more" if len(failed) > 8 else ""
            raise ValueError(f"scores: {len(failed)} of {m} rows could not be selected: "
                             f"{shown}{more}; their rows of out are -1")
