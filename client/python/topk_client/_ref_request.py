"""ZeroCopyClient's two ways of sending a Select by reference, from one
description: the call is filled once into a RefSelect structure
(topk_client._native, the C ABI's topk_rpc_ref_select) whichever path sends
it, so both paths make the same checks in the same order. The native core
takes the structure as it is; the grpcio path sends the SelectRequest it
describes (to_proto). Also the native core's region session behind
RegionSession's interface (NativeRegionSession)."""

import numpy as np

from topk_client import _native
from topk_client._stubs import topk_pb2


def flags(sorted: bool, deterministic: bool, values: bool) -> int:
    return ((_native.SORTED if sorted else 0) | (_native.DETERMINISTIC if deterministic else 0) |
            (_native.RETURN_VALUES if values else 0))


def int32_lengths(lengths) -> np.ndarray:
    """Inline lengths as a contiguous int32 array; a value outside int32 is a
    ValueError, as protobuf makes it on the grpcio path."""
    if isinstance(lengths, np.ndarray) and lengths.dtype == np.int32 and \
            lengths.flags.c_contiguous and lengths.ndim == 1:
        return lengths
    if not isinstance(lengths, np.ndarray) and hasattr(lengths, "tolist"):
        lengths = lengths.tolist()  # a torch tensor on the host, say
    array = np.asarray(lengths).reshape(-1)
    if array.dtype != np.int32:
        wide = array.astype(np.int64)
        if wide.size and (wide.min() < -2**31 or wide.max() >= 2**31):
            raise ValueError("lengths: a value outside int32")
        array = wide.astype(np.int32)
    return np.ascontiguousarray(array)


def _ref(ref) -> topk_pb2.RegionRef:
    return topk_pb2.RegionRef(region=ref.region.decode(), offset=ref.offset)


def to_proto(request, lengths, session_id: str) -> topk_pb2.SelectRequest:
    """The SelectRequest a RefSelect describes (`lengths`: the inline lengths'
    array it points at, or None)."""
    rows = topk_pb2.RegionRows(scores=_ref(request.scores), num_rows=request.num_rows,
                               row_pitch=request.row_pitch, width=request.width,
                               dtype=request.dtype)
    if request.lengths_ref.region is not None:
        rows.lengths_ref.CopyFrom(_ref(request.lengths_ref))
    elif lengths is not None:
        rows.lengths.extend(lengths.tolist())
    bits = request.options
    message = topk_pb2.SelectRequest(
        k=request.k, request_id=(request.request_id or b"").decode(), session_id=session_id,
        options=topk_pb2.SelectOptions(sorted=bool(bits & _native.SORTED),
                                       deterministic=bool(bits & _native.DETERMINISTIC),
                                       return_values=bool(bits & _native.RETURN_VALUES)),
        region_rows=rows)
    if request.out_indices.region is not None:
        message.output.indices.CopyFrom(_ref(request.out_indices))
        message.output.row_stride = request.out_row_stride
        if request.out_values.region is not None:
            message.output.values.CopyFrom(_ref(request.out_values))
    if request.wait_event is not None or request.record_event is not None:
        message.ordering.wait_event = (request.wait_event or b"").decode()
        message.ordering.record_event = (request.record_event or b"").decode()
    return message


class NativeRegionSession:
    """RegionSession's interface over the native core's session: the session
    stream, the registrations and the selects are the C++ client's; list()
    asks over grpcio (any connection may name a session by its id)."""

    def __init__(self, core: "_native.NativeSession", stub):
        self._core = core
        self._stub = stub
        self.id = core.id

    def close(self):
        self._core.close()

    def register(self, name: str, **kind):
        """register(name, shm=ShmRegion(...) | cuda_ipc=CudaIpcRegion(...) |
        cuda_event=CudaIpcEvent(...)); the core writes the shared-memory
        ownership proof itself."""
        if len(kind) != 1 or not set(kind) <= {"shm", "cuda_ipc", "cuda_event"}:
            raise ValueError("register: exactly one of shm=, cuda_ipc=, cuda_event=")
        if "shm" in kind:
            shm = kind["shm"]
            self._core.register_shm(name, shm.shm_name, shm.offset, shm.byte_size)
        elif "cuda_ipc" in kind:
            ipc = kind["cuda_ipc"]
            self._core.register_cuda_ipc(name, ipc.ipc_handle, ipc.offset, ipc.byte_size,
                                         ipc.device.uuid, ipc.device.ordinal)
        else:
            event = kind["cuda_event"]
            self._core.register_cuda_event(name, event.ipc_event_handle, event.device.uuid,
                                           event.device.ordinal)

    def unregister(self, name: str):
        self._core.unregister(name)

    def unregister_all(self) -> int:
        return self._core.unregister_all()

    def list(self):
        return list(self._stub.ListRegions(topk_pb2.ListRegionsRequest(session_id=self.id)).regions)
