"""CUDA IPC details of sharing torch tensors with the server: the size of the
allocation behind a pointer (the region to register), and the 64-byte
cudaIpcMemHandle_t inside torch's own sharing handle."""

import ctypes
from typing import Optional

from topk_client._checks import RegionError


def cuda_allocation_size(pointer: int) -> Optional[int]:
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


def cuda_ipc_handle(shared: bytes, what: str) -> bytes:
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
