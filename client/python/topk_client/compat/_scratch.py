"""Device buffers the drop-ins compute row lengths and offsets into: one set
per (GPU, row count rounded up to a power of two), made on first use and
kept for the life of the process, so that a call allocates nothing and a
captured CUDA graph never points at memory handed back. Like the
selector's own buffers, a set serves one stream at a time."""

import threading

import torch

from topk_client.compat import _rows
from topk_client.inprocess import round_up_pow2


class RowBuffers:
    def __init__(self, device, rows: int):
        self.lengths = torch.empty(rows, dtype=torch.int32, device=device)
        self.offsets = torch.empty(rows, dtype=torch.int64, device=device)
        self.row_index = torch.arange(rows, dtype=torch.int64, device=device)
        self._steps = {}
        self._device = device

    def steps(self, next_n: int):
        """_rows.step_offsets(next_n) on this GPU, made once."""
        steps = self._steps.get(next_n)
        if steps is None:
            steps = self._steps[next_n] = _rows.step_offsets(torch, next_n, device=self._device)
        return steps


_buffers = {}
_lock = threading.Lock()


def row_buffers(like, rows: int) -> RowBuffers:
    """The buffers for `rows` rows on `like`'s GPU."""
    key = (like.get_device(), round_up_pow2(rows))
    found = _buffers.get(key)
    if found is None:
        with _lock:
            found = _buffers.get(key)
            if found is None:
                found = _buffers[key] = RowBuffers(like.device, key[1])
    return found
