"""Score types on the wire (topk.v1.ScoreType): which one a set of rows is
sent as, and the rows as numpy arrays of that type's 2- or 4-byte elements.

numpy has no bfloat16: BF16 rows are torch.bfloat16 tensors (when torch is
importable), uint16 arrays of raw BF16 patterns with dtype="bf16", or float
rows rounded to BF16 (nearest even) with dtype="bf16"."""

from typing import List, Optional, Sequence, Tuple

import numpy as np

from topk_client._stubs import topk_pb2

# name -> (wire enum, numpy element type as sent)
_TYPES = {
    "fp32": (topk_pb2.SCORE_TYPE_FP32, np.dtype("<f4")),
    "bf16": (topk_pb2.SCORE_TYPE_BF16, np.dtype("<u2")),
    "fp16": (topk_pb2.SCORE_TYPE_FP16, np.dtype("<f2")),
}


def _torch_to_numpy(x):
    """A torch tensor as a host numpy array (BF16 as its uint16 patterns) and
    the type it implies; anything else unchanged, with no implied type."""
    module = type(x).__module__
    if not module.startswith("torch"):
        return x, None
    import torch  # only reached for torch tensors
    t = x.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), "bf16"
    if t.dtype == torch.float16:
        return t.numpy(), "fp16"
    return t.numpy(), None


def float_to_bf16(values) -> np.ndarray:
    """float32 -> BF16 patterns (uint16), round to nearest even; NaN stays a
    (quiet) NaN."""
    bits = np.ascontiguousarray(values, dtype="<f4").view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(bits.view(np.float32)), np.uint16(0x7FC0), rounded)


def bf16_to_float(bits) -> np.ndarray:
    """BF16 patterns (uint16) -> float32, exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _convert(array: np.ndarray, name: str) -> np.ndarray:
    if name == "bf16":
        if array.dtype in (np.uint16, np.int16):
            return array.view(np.uint16)
        return float_to_bf16(array)
    if name == "fp16" and array.dtype in (np.uint16, np.int16):
        return array.view("<f2")  # raw FP16 patterns
    if array.dtype in (np.uint16, np.int16):
        raise ValueError("16-bit integer rows are raw patterns: pass dtype='bf16' or 'fp16'")
    return np.asarray(array, dtype=_TYPES[name][1])


def as_wire_rows(rows, dtype: Optional[str]) -> Tuple[object, int, np.dtype]:
    """(rows as numpy arrays of the element type, wire enum, element type).
    dtype None: BF16 for torch.bfloat16 rows, FP16 for float16 rows (numpy or
    torch), else FP32."""
    if dtype is not None and dtype not in _TYPES:
        raise ValueError(f"dtype must be one of {sorted(_TYPES)}, got {dtype!r}")
    ragged = isinstance(rows, (list, tuple))
    items: List = list(rows) if ragged else [rows]
    implied = None
    for i, item in enumerate(items):
        items[i], kind = _torch_to_numpy(item)
        items[i] = np.asarray(items[i])
        if kind is None and items[i].dtype == np.float16:
            kind = "fp16"
        implied = implied or kind
    name = dtype or implied or "fp32"
    items = [_convert(a, name) for a in items]
    wire, element = _TYPES[name]
    return (items if ragged else items[0]), wire, element


def decode_values(raw: bytes, values_dtype: int, shape: Sequence[int]) -> np.ndarray:
    """SelectResponse.values in its type: float32, float16, or uint16 BF16
    patterns (bf16_to_float widens them)."""
    element = {topk_pb2.SCORE_TYPE_FP32: "<f4", topk_pb2.SCORE_TYPE_BF16: "<u2",
               topk_pb2.SCORE_TYPE_FP16: "<f2"}[values_dtype]
    return np.frombuffer(raw, dtype=element).reshape(shape).copy()
