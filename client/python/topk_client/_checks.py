"""Argument checks shared by the two paths that take torch CUDA tensors:
ZeroCopyClient.select (regions.py: the rows go to a server by reference) and
InProcessSelector.select (inprocess.py: the rows are selected in this
process). One wording and one error type for both, so a caller can switch
paths without changing what it catches.

Nothing here imports torch or grpc: the callers pass torch's dtypes, so the
checks run (and are tested) wherever the package imports.
"""


class RegionError(RuntimeError):
    """A tensor or array that cannot be sent by reference, or selected from
    in process."""


SCORES_2D = "scores: a 2-D array with contiguous rows"
SCORES_CUDA = "scores: a float32, bfloat16 or float16 CUDA tensor"
LENGTHS_DEVICE = "lengths: a contiguous int32 tensor on the scores' GPU"
VALUES_STRIDE = "values: must have the same row stride as out"


def is_torch(array) -> bool:
    return type(array).__module__.startswith("torch")


def check_rows(scores) -> None:
    """A 2-D array (torch or numpy) whose rows are contiguous; any row pitch."""
    if scores.ndim != 2:
        raise RegionError(SCORES_2D)
    unit_stride = (scores.stride(1) == 1) if is_torch(scores) else (
        scores.strides[1] == scores.itemsize)
    if not unit_stride:
        raise RegionError(SCORES_2D)


def score_type(scores, types: dict):
    """types[scores.dtype] for a CUDA tensor of one of `types`' dtypes."""
    code = types.get(scores.dtype)
    if not scores.is_cuda or code is None:
        raise RegionError(SCORES_CUDA)
    return code


def check_device_lengths(lengths, device, int32) -> None:
    if lengths.dtype != int32 or lengths.device != device or not lengths.is_contiguous():
        raise RegionError(LENGTHS_DEVICE)


def check_outputs(scores, k: int, out, values, int32) -> None:
    """out (int32) and values (the scores' dtype), each (M, >= k) with
    contiguous rows on the scores' device; values may be None."""
    device = scores.device
    for name, t, dtype in (("out", out, int32), ("values", values, scores.dtype)):
        if t is not None and (t.device != device or t.dtype != dtype or t.stride(1) != 1
                              or t.shape[1] < k or t.shape[0] != scores.shape[0]):
            raise RegionError(f"{name}: ({scores.shape[0]}, >= {k}) {dtype} on {device} "
                              "with contiguous rows")


def check_values_stride(out, values) -> None:
    if values is not None and values.stride(0) != out.stride(0):
        raise RegionError(VALUES_STRIDE)
