"""A channel's control block from the client's side: the layout of
proto/topk/channel/control_block.h mirrored, the descriptor's packing, the
status words, and the CUDA driver calls that map the block and enqueue a
call's stream memory operations (ctypes on libcuda.so.1: no extension)."""

import ctypes
import mmap
import os
import struct
from typing import Dict, Sequence, Tuple

# --- proto/topk/channel/control_block.h, mirrored ----------------------------------

LAYOUT_VERSION = 1
CONTROL_BYTES = 4096
MAX_REGIONS = 8
NO_REGION = 0xFFFFFFFF
_READY_OFFSET = 0
_DONE_OFFSET = 64
_STATUS_OFFSET = 128  # status u32, status_row i32, status_value i64, calls u64, errors u64
_DESC_OFFSET = 256
_DESC_WORDS = 9  # the 72-byte topk_channel_descriptor as little-endian 64-bit words

STATUS_OK = 0
STATUS_BAD_NUM_ROWS = 1
STATUS_BAD_REGION = 2
STATUS_BAD_SCORES = 3
STATUS_BAD_ROW_PITCH = 4
STATUS_BAD_LENGTHS = 5
STATUS_BAD_INDICES = 6
STATUS_BAD_VALUES = 7
STATUS_BAD_ROW_STRIDE = 8
STATUS_MISALIGNED = 9
STATUS_OVERLAP = 10
STATUS_BAD_LENGTH = 11
STATUS_NAN = 12
STATUS_CLOSED = 13
STATUS_DEVICE_ERROR = 14

# topk_channel_status_field(): the descriptor field a status names.
STATUS_FIELDS: Dict[int, str] = {
    STATUS_OK: "",
    STATUS_BAD_NUM_ROWS: "num_rows",
    STATUS_BAD_REGION: "region",
    STATUS_BAD_SCORES: "scores_offset",
    STATUS_BAD_ROW_PITCH: "row_pitch",
    STATUS_BAD_LENGTHS: "lengths_offset",
    STATUS_BAD_INDICES: "indices_offset",
    STATUS_BAD_VALUES: "values_offset",
    STATUS_BAD_ROW_STRIDE: "out_row_stride",
    STATUS_MISALIGNED: "offset alignment",
    STATUS_OVERLAP: "output overlap",
    STATUS_BAD_LENGTH: "lengths",
    STATUS_NAN: "scores (NaN)",
    STATUS_CLOSED: "channel closed",
    STATUS_DEVICE_ERROR: "device",
}

STATUS_NAMES: Dict[int, str] = {
    STATUS_OK: "OK", STATUS_BAD_NUM_ROWS: "BAD_NUM_ROWS", STATUS_BAD_REGION: "BAD_REGION",
    STATUS_BAD_SCORES: "BAD_SCORES", STATUS_BAD_ROW_PITCH: "BAD_ROW_PITCH",
    STATUS_BAD_LENGTHS: "BAD_LENGTHS", STATUS_BAD_INDICES: "BAD_INDICES",
    STATUS_BAD_VALUES: "BAD_VALUES", STATUS_BAD_ROW_STRIDE: "BAD_ROW_STRIDE",
    STATUS_MISALIGNED: "MISALIGNED", STATUS_OVERLAP: "OVERLAP", STATUS_BAD_LENGTH: "BAD_LENGTH",
    STATUS_NAN: "NAN", STATUS_CLOSED: "CLOSED", STATUS_DEVICE_ERROR: "DEVICE_ERROR",
}

_DESC_FIELDS = ("num_rows", "scores_region", "lengths_region", "indices_region",
                "values_region", "reserved", "scores_offset", "row_pitch", "lengths_offset",
                "indices_offset", "values_offset", "out_row_stride")
_U32, _U64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF


def pack_descriptor(num_rows=0, scores_region=0, lengths_region=0, indices_region=0,
                    values_region=NO_REGION, reserved=0, scores_offset=0, row_pitch=0,
                    lengths_offset=0, indices_offset=0, values_offset=0,
                    out_row_stride=0) -> Tuple[int, ...]:
    """A topk_channel_descriptor as the 9 little-endian 64-bit words a call
    writes (each field truncated to its width, so fuzzing can pass anything)."""
    return ((num_rows & _U32) | (scores_region & _U32) << 32,
            (lengths_region & _U32) | (indices_region & _U32) << 32,
            (values_region & _U32) | (reserved & _U32) << 32,
            scores_offset & _U64, row_pitch & _U64, lengths_offset & _U64,
            indices_offset & _U64, values_offset & _U64, out_row_stride & _U64)


def unpack_descriptor(words: Sequence[int]) -> Dict[str, int]:
    """The inverse of pack_descriptor: field name -> value."""
    halves = []
    for w in words[:3]:
        halves += [w & _U32, w >> 32]
    return dict(zip(_DESC_FIELDS, halves + list(words[3:_DESC_WORDS])))


class ChannelError(RuntimeError):
    """A channel call the server refused (nothing was written into its
    outputs): .status (a STATUS_* code), .name, .field (the descriptor field at
    fault, as topk_channel_status_field), .row (-1 when no row) and .value (the
    offending length or offset)."""

    def __init__(self, status: int, row: int = -1, value: int = 0, message: str = ""):
        self.status = status
        self.name = STATUS_NAMES.get(status, f"status {status}")
        self.field = STATUS_FIELDS.get(status, "unknown status")
        self.row = row
        self.value = value
        where = f" at row {row}" if row >= 0 else ""
        super().__init__(message or f"channel call refused: {self.name} ({self.field}){where}, "
                                    f"value {value}")


# --- the CUDA driver, through ctypes --------------------------------------------

_CU_STREAM_MEM_OP_WAIT_VALUE_32 = 1
_CU_STREAM_MEM_OP_WRITE_VALUE_32 = 2
_CU_STREAM_MEM_OP_WRITE_VALUE_64 = 5
_CU_STREAM_WAIT_VALUE_EQ = 1
_CU_MEMHOSTREGISTER_PORTABLE = 1
_CU_MEMHOSTREGISTER_DEVICEMAP = 2
_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122
_CUDA_ERROR_INVALID_CONTEXT = 201
_CUDA_ERROR_NOT_READY = 600

# CUstreamBatchMemOpParams: a 48-byte union; for waits and writes: u32
# operation (+4 pad), u64 address, u64 value (value32 in the low half), u32
# flags (+4 pad), u64 alias, then 8 bytes of padding. Kept as 6 u64 words per
# op, so a call patches plain array items.
_OP_WORDS = 6
_OPS = 12  # 9 descriptor words, ready = 1, wait done == 1, done = 0

_c = ctypes
_P = _c.c_void_p


class _Driver:
    """The few libcuda.so.1 entry points a channel uses (one per process)."""

    _instance = None

    @classmethod
    def get(cls) -> "_Driver":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        lib = _c.CDLL("libcuda.so.1")
        self._lib = lib

        def fn(name, *argtypes):
            f = getattr(lib, name)
            f.argtypes = list(argtypes)
            f.restype = _c.c_int
            return f

        self.get_error_name = fn("cuGetErrorName", _c.c_int, _c.POINTER(_c.c_char_p))
        self.device_get = fn("cuDeviceGet", _c.POINTER(_c.c_int), _c.c_int)
        self.device_attribute = fn("cuDeviceGetAttribute", _c.POINTER(_c.c_int), _c.c_int,
                                   _c.c_int)
        self.primary_retain = fn("cuDevicePrimaryCtxRetain", _c.POINTER(_P), _c.c_int)
        self.primary_release = fn("cuDevicePrimaryCtxRelease_v2", _c.c_int)
        self.ctx_push = fn("cuCtxPushCurrent_v2", _P)
        self.ctx_pop = fn("cuCtxPopCurrent_v2", _c.POINTER(_P))
        self.ctx_set = fn("cuCtxSetCurrent", _P)
        self.host_register = fn("cuMemHostRegister_v2", _P, _c.c_size_t, _c.c_uint)
        self.host_unregister = fn("cuMemHostUnregister", _P)
        self.host_device_pointer = fn("cuMemHostGetDevicePointer_v2", _c.POINTER(_c.c_uint64), _P,
                                      _c.c_uint)
        self.stream_query = fn("cuStreamQuery", _P)
        # The _v2 batch: the API every driver since CUDA 11.7 serves by default
        # (the first version needed a driver module option).
        self.batch_mem_op = fn("cuStreamBatchMemOp_v2", _P, _c.c_uint, _P, _c.c_uint)

    def error_name(self, rc: int) -> str:
        name = _c.c_char_p()
        if self.get_error_name(rc, _c.byref(name)) != 0 or not name.value:
            return f"CUresult {rc}"
        return f"{name.value.decode()} ({rc})"

    def check(self, rc: int, what: str):
        if rc != 0:
            raise RuntimeError(f"{what}: {self.error_name(rc)}")


class _Context:
    """The primary context of one device (the one torch uses), retained for
    the channel's lifetime and made current around driver calls that need it
    (registering host memory; querying the legacy default stream)."""

    def __init__(self, driver: _Driver, ordinal: int):
        self._driver = driver
        device = _c.c_int()
        driver.check(driver.device_get(_c.byref(device), ordinal), "cuDeviceGet")
        self._device = device.value
        ctx = _P()
        driver.check(driver.primary_retain(_c.byref(ctx), self._device), "cuDevicePrimaryCtxRetain")
        self.handle = ctx

    def __enter__(self):
        self._driver.check(self._driver.ctx_push(self.handle), "cuCtxPushCurrent")
        return self

    def __exit__(self, *exc):
        popped = _P()
        self._driver.ctx_pop(_c.byref(popped))

    def attribute(self, attribute: int) -> int:
        value = _c.c_int()
        self._driver.check(self._driver.device_attribute(_c.byref(value), attribute, self._device),
                           "cuDeviceGetAttribute")
        return value.value

    def release(self):
        self._driver.primary_release(self._device)


class _ControlBlock:
    """The server's control-block page mapped here (MAP_SHARED, read-write),
    registered with the driver so that the client's stream can write and
    wait on it through its device address."""

    def __init__(self, shm_name: str, context: _Context, driver: _Driver):
        if not shm_name.startswith("/") or "/" in shm_name[1:]:
            raise RuntimeError(f"OpenChannel: a control block name {shm_name!r} that is no "
                               "POSIX shared-memory name")
        # Opened by path rather than multiprocessing.shared_memory: its
        # resource tracker would unlink the server's object when we exit.
        fd = os.open("/dev/shm/" + shm_name[1:], os.O_RDWR)
        try:
            self.map = mmap.mmap(fd, CONTROL_BYTES, mmap.MAP_SHARED,
                                 mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._driver = driver
        self._anchor = (_c.c_char * CONTROL_BYTES).from_buffer(self.map)  # its address
        self.host_address = _c.addressof(self._anchor)
        self.device_address = 0
        try:
            with context:
                driver.check(driver.host_register(
                    self.host_address, CONTROL_BYTES,
                    _CU_MEMHOSTREGISTER_PORTABLE | _CU_MEMHOSTREGISTER_DEVICEMAP),
                    "cuMemHostRegister (the channel's control block)")
                dptr = _c.c_uint64()
                rc = driver.host_device_pointer(_c.byref(dptr), self.host_address, 0)
                if rc != 0:
                    driver.host_unregister(self.host_address)
                    driver.check(rc, "cuMemHostGetDevicePointer")
                self.device_address = dptr.value
        except Exception:
            self._unmap()
            raise

    def mem_ops(self):
        """The call's 12 stream memory operations, every address and constant
        in place; a call patches the 9 descriptor values (words 6 * i + 2)."""
        ops = (_c.c_uint64 * (_OPS * _OP_WORDS))()

        def put(i, operation, offset, value, flags=0):
            ops[i * _OP_WORDS + 0] = operation
            ops[i * _OP_WORDS + 1] = self.device_address + offset
            ops[i * _OP_WORDS + 2] = value
            ops[i * _OP_WORDS + 3] = flags  # writes: 0, a memory barrier before each

        for i in range(_DESC_WORDS):
            put(i, _CU_STREAM_MEM_OP_WRITE_VALUE_64, _DESC_OFFSET + 8 * i, 0)
        put(9, _CU_STREAM_MEM_OP_WRITE_VALUE_32, _READY_OFFSET, 1)
        put(10, _CU_STREAM_MEM_OP_WAIT_VALUE_32, _DONE_OFFSET, 1, _CU_STREAM_WAIT_VALUE_EQ)
        put(11, _CU_STREAM_MEM_OP_WRITE_VALUE_32, _DONE_OFFSET, 0)
        return ops

    def read_status(self) -> Tuple[int, int, int]:
        return struct.unpack_from("<Iiq", self.map, _STATUS_OFFSET)

    def counters(self) -> Tuple[int, int]:
        return struct.unpack_from("<QQ", self.map, _STATUS_OFFSET + 16)

    def words(self) -> Tuple[int, ...]:
        return struct.unpack_from(f"<{_DESC_WORDS}Q", self.map, _DESC_OFFSET)

    def release_waiter(self):
        """Answers a call the server will not: status CLOSED, done = 1, so a
        stream waiting on it goes on (its outputs are not written)."""
        struct.pack_into("<Iiq", self.map, _STATUS_OFFSET, STATUS_CLOSED, -1, 0)
        struct.pack_into("<I", self.map, _READY_OFFSET, 0)
        struct.pack_into("<I", self.map, _DONE_OFFSET, 1)  # x86 keeps the stores in order

    def close(self, context: _Context):
        if self.device_address:
            with context:
                self._driver.host_unregister(self.host_address)
            self.device_address = 0
        self._unmap()

    def _unmap(self):
        self._anchor = None  # the mmap cannot close while a ctypes view exports it
        self.map.close()
