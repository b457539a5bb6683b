"""Where a CUDA tensor lies in a ZeroCopyClient session's regions, found
once per allocation and then by address: what the channels (channel.py) and
ZeroCopyClient.select (regions.py) share, below both, so that neither
imports the other for it."""

from typing import Dict, Tuple

from topk_client._checks import RegionError


class _RegionCache:
    """Where a tensor's data is in the session's regions, without asking
    torch for a CUDA IPC handle (ZeroCopyClient._cuda_ref) on every call.

    Keyed by data pointer (views of one buffer share it) and then by storage
    data pointer (other views of a known storage), each entry holding a weak
    reference to the storage it was found in: while that storage lives, its
    memory cannot be handed back to the driver and mapped again at the same
    address (the one case where an address would name another allocation),
    so a hit is only trusted while the reference is alive."""

    _MAX_ENTRIES = 1024

    def __init__(self, zc):
        import torch
        from torch.multiprocessing.reductions import StorageWeakRef
        self._zc = zc
        self._weak = StorageWeakRef
        self._storage = (torch.Tensor.untyped_storage if hasattr(torch.Tensor, "untyped_storage")
                         else torch.Tensor.storage)
        self._by_data: Dict[int, tuple] = {}     # data_ptr -> (weak, region, offset)
        self._by_storage: Dict[int, tuple] = {}  # storage data_ptr -> (weak, region, offset)

    def lookup(self, tensor, what: str, capturing: bool) -> Tuple[str, int]:
        ptr = tensor.data_ptr()
        hit = self._by_data.get(ptr)
        if hit is not None and not hit[0].expired():
            return hit[1], hit[2]
        storage = self._storage(tensor)
        base = storage.data_ptr()
        hit = self._by_storage.get(base)
        if hit is not None and not hit[0].expired():
            entry = (hit[0], hit[1], hit[2] + (ptr - base))
        else:
            if capturing:
                # Finding a new allocation's region exports it (an event
                # recorded on the stream), which a capture cannot hold.
                raise RegionError(f"{what}: a tensor this channel has not seen, inside a CUDA "
                                  "graph capture: warm up first (one select with the same "
                                  "buffers before capturing)")
            ref = self._zc._cuda_ref(tensor, what)
            weak = self._weak(storage)
            self._remember(self._by_storage, base, (weak, ref.region, ref.offset - (ptr - base)))
            entry = (weak, ref.region, ref.offset)
        self._remember(self._by_data, ptr, entry)
        return entry[1], entry[2]

    def _remember(self, table, key, entry):
        if len(table) >= self._MAX_ENTRIES:
            table.clear()  # a frontend keeps a few static buffers; this is the odd case
        table[key] = entry
