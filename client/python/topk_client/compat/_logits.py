"""The argument checks the engines' calls share: the logits' rows as the
call describes them (num_rows, stride0, stride1) and the per-row tensors
beside them. Errors name the engine's argument (ValueError); the scores and
the output are then checked by InProcessSelector.select (its RegionError)."""

import torch


def logits_rows(logits, num_rows: int, stride0: int, stride1: int):
    """The first num_rows rows of the 2-D logits, whose strides must be the
    ones the call states, with unit stride along a row (what the selector
    reads)."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        raise ValueError("logits: a 2-D tensor (rows x positions)")
    if stride1 != 1 or logits.stride(1) != 1:
        raise ValueError(f"stride1 = {stride1}: the selector reads rows of unit stride (1)")
    if not isinstance(num_rows, int) or not 0 <= num_rows <= logits.shape[0]:
        raise ValueError(f"num_rows = {num_rows}: must be in [0, {logits.shape[0]}] "
                         "(the logits' rows)")
    if num_rows > 1 and stride0 != logits.stride(0):
        raise ValueError(f"stride0 = {stride0}: the logits' row stride is {logits.stride(0)}")
    return logits if num_rows == logits.shape[0] else logits[:num_rows]


def first_rows(tensor, num_rows: int):
    """tensor[:num_rows] without a new view when it already has that many."""
    return tensor if tensor.shape[0] == num_rows else tensor[:num_rows]


def per_row_int32(tensor, name: str, num_rows: int, device):
    """A (>= num_rows,) int32 tensor on the logits' GPU, cut to num_rows."""
    if (not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.int32 or
            tensor.device != device or tensor.dim() != 1 or tensor.shape[0] < num_rows):
        raise ValueError(f"{name}: a (>= {num_rows},) int32 tensor on {device}")
    return first_rows(tensor, num_rows)
