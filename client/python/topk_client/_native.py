"""The native RPC core: libtopk_client_c.so (the C++ client behind the C ABI
of client/include/topk/client/topk_client_c.h), loaded with ctypes.

Why ctypes over a C ABI and not an extension module: an extension module is
built for one interpreter's ABI (a build on Debian's Python 3.11 does not
import on a GPU host's 3.12), while a C library loads into any of them.

Why a native core at all: grpcio's own unary round trip costs more than the
C++ client's whole Select by reference (bench/NOTES.md, issue 20), so the
hot calls (Select by reference on a SelectPipeline stream, and inline
Select) go through the C++ client; the control-plane calls stay on grpcio.

Where the library is found: topk_client._library (TOPK_CLIENT_LIBRARY, this
package's folder, the install prefixes). TOPK_CLIENT_NATIVE=0 turns the core
off for every client that does not ask for it by argument.

Per call the Python side fills a request and an answer structure it keeps
per thread (no allocation but the answer arrays) and makes one foreign call,
which releases the GIL while it waits.
"""

import ctypes as C
import os
import threading
import warnings
from typing import Optional, Union

from topk_client import _library
from topk_client._errors import CallError, SelectError

LIBRARY_NAME = "libtopk_client_c.so"
LIBRARY_VARIABLE = "TOPK_CLIENT_LIBRARY"
SWITCH_VARIABLE = "TOPK_CLIENT_NATIVE"
ABI_VERSION = 1  # TOPK_RPC_ABI_VERSION

CALL_PIPELINE, CALL_UNARY = 0, 1
SORTED, DETERMINISTIC, RETURN_VALUES = 1, 2, 4
MESSAGE_BYTES = 4096


class Ref(C.Structure):
    _fields_ = [("region", C.c_char_p), ("offset", C.c_uint64)]


class RefSelect(C.Structure):
    _fields_ = [("k", C.c_int32), ("num_rows", C.c_int32), ("options", C.c_uint32),
                ("dtype", C.c_int32), ("scores", Ref), ("row_pitch", C.c_int64),
                ("lengths", C.c_void_p), ("num_lengths", C.c_int32), ("lengths_ref", Ref), ("width", C.c_int32),
                ("out_indices", Ref), ("out_values", Ref), ("out_row_stride", C.c_int64),
                ("wait_event", C.c_char_p), ("record_event", C.c_char_p),
                ("request_id", C.c_char_p)]


class Timings(C.Structure):
    _fields_ = [("queue_us", C.c_int64), ("device_us", C.c_int64), ("total_us", C.c_int64),
                ("prepare_us", C.c_int64), ("client_us", C.c_int64),
                ("batch_requests", C.c_int32)]


class Answer(C.Structure):
    _fields_ = [("indices", C.c_void_p), ("values", C.c_void_p), ("capacity", C.c_int64),
                ("num_rows", C.c_int64), ("k", C.c_int32), ("timings", Timings)]


class InlineSelect(C.Structure):
    _fields_ = [("k", C.c_int32), ("num_rows", C.c_int32), ("options", C.c_uint32),
                ("dtype", C.c_int32), ("rows", C.c_void_p), ("lengths", C.c_void_p),
                ("request_id", C.c_char_p), ("timeout_us", C.c_int64)]


class ClientOptions(C.Structure):
    _fields_ = [("target", C.c_char_p), ("max_send_message_bytes", C.c_int64),
                ("max_receive_message_bytes", C.c_int64),
                ("load_balancing_policy", C.c_char_p)]


class ClientTls(C.Structure):
    """topk_rpc_tls_options: PEM text, NULL where not given."""
    _fields_ = [("root_certs_pem", C.c_char_p), ("cert_chain_pem", C.c_char_p),
                ("private_key_pem", C.c_char_p), ("server_name", C.c_char_p)]


# Added to ABI version 1 after its first builds: typed when the library has it.
_TLS_OPEN = "topk_rpc_client_open_tls"


def has_tls(lib) -> bool:
    """Whether this build of the core opens TLS channels."""
    return hasattr(lib, _TLS_OPEN)


def _type(lib):
    p, msg, n = C.c_void_p, C.c_char_p, C.c_size_t
    signatures = {
        "topk_rpc_abi_version": ([], C.c_int32),
        "topk_rpc_client_open": ([C.POINTER(ClientOptions), C.POINTER(p), msg, n], C.c_int32),
        "topk_rpc_client_close": ([p], None),
        "topk_rpc_session_open": ([p, C.c_int32, C.POINTER(p), msg, n], C.c_int32),
        "topk_rpc_session_close": ([p], None),
        "topk_rpc_session_id": ([p], C.c_char_p),
        "topk_rpc_register_shm": ([p, C.c_char_p, C.c_char_p, C.c_uint64, C.c_uint64, msg, n],
                                  C.c_int32),
        "topk_rpc_register_cuda_ipc": ([p, C.c_char_p, C.c_char_p, n, C.c_uint64, C.c_uint64,
                                        C.c_char_p, C.c_int32, msg, n], C.c_int32),
        "topk_rpc_register_cuda_event": ([p, C.c_char_p, C.c_char_p, n, C.c_char_p, C.c_int32,
                                          msg, n], C.c_int32),
        "topk_rpc_unregister": ([p, C.c_char_p, msg, n], C.c_int32),
        "topk_rpc_unregister_all": ([p, C.POINTER(C.c_int32), msg, n], C.c_int32),
        "topk_rpc_select_ref": ([p, C.POINTER(RefSelect), C.POINTER(Answer), msg, n],
                                C.c_int32),
        "topk_rpc_select_inline": ([p, C.POINTER(InlineSelect), C.POINTER(Answer), msg, n],
                                   C.c_int32),
    }
    if has_tls(lib):
        signatures[_TLS_OPEN] = ([C.POINTER(ClientOptions), C.POINTER(ClientTls), C.POINTER(p),
                                  msg, n], C.c_int32)
    for name, (args, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = args
        function.restype = result


# One core per process: each copy of the library registers topk.proto's
# generated descriptors with the process's one libprotobuf, which aborts on a
# second registration. The first copy loaded serves every later request.
_loaded = None  # (path, CDLL)
_load_lock = threading.Lock()


def _same_file(a: str, b: str) -> bool:
    if os.path.samefile(a, b):
        return True
    with open(a, "rb") as first, open(b, "rb") as second:
        return first.read() == second.read()  # a copy (the package's, say) of the same build


def load_library(library: Optional[str] = None) -> Optional[C.CDLL]:
    """The core, typed; None when it is not installed (nothing explicit
    named). RuntimeError when the library asked for (by argument or
    TOPK_CLIENT_LIBRARY) is missing, or any found does not load or is not
    this ABI version, or differs from the copy this process already loaded."""
    global _loaded
    explicit = _library.explicit(LIBRARY_VARIABLE, library)
    candidates = _library.candidates(LIBRARY_NAME, LIBRARY_VARIABLE, library)
    path = next((p for p in candidates if os.path.isfile(p)), None)
    with _load_lock:
        if _loaded is not None and (path is None or not explicit):
            return _loaded[1]
        if path is None:
            if explicit:
                how = "the path given" if library else LIBRARY_VARIABLE
                raise RuntimeError(f"{LIBRARY_NAME} not found: {how} {candidates[0]}")
            return None
        if _loaded is not None:
            if _same_file(path, _loaded[0]):
                return _loaded[1]
            raise RuntimeError(f"{path}: this process already loaded {LIBRARY_NAME} from "
                               f"{_loaded[0]}, a different build; one copy per process")
        lib, version = _library.open_library(path, LIBRARY_NAME, "topk_rpc_abi_version")
        if version != ABI_VERSION:
            raise RuntimeError(f"{path}: C ABI version {version}, this package speaks "
                               f"{ABI_VERSION}")
        _type(lib)
        _loaded = (path, lib)
        return lib


def resolve(native: Union[bool, str, None]) -> Optional[C.CDLL]:
    """The core a client should use, from its `native` argument: None (the
    default) uses it when it is found and loads, else grpcio (a library that
    is there but will not load says why in a warning); True requires it;
    a path requires that library; False never uses it."""
    if native is False:
        return None
    if native is None and os.environ.get(SWITCH_VARIABLE, "") == "0":
        return None
    library = native if isinstance(native, str) else None
    required = native is not None or _library.explicit(LIBRARY_VARIABLE)
    try:
        lib = load_library(library)
    except RuntimeError as e:
        if required:
            raise
        warnings.warn(f"topk_client: the native RPC core is unusable, using grpcio: {e}")
        return None
    if lib is None and native is True:
        looked = ", ".join(_library.candidates(LIBRARY_NAME, LIBRARY_VARIABLE))
        raise RuntimeError(f"native=True: {LIBRARY_NAME} not found: looked in {looked} (build "
                           f"target topk_client_c, or set {LIBRARY_VARIABLE})")
    return lib


def _text(buffer) -> str:
    return buffer.value.decode(errors="replace")


class _CallState:
    """One thread's request and answer structures and message buffer."""

    def __init__(self, request_type):
        self.request = request_type()
        self.answer = Answer()
        self.message = C.create_string_buffer(MESSAGE_BYTES)
        self.request_ref = C.byref(self.request)
        self.answer_ref = C.byref(self.answer)


class _Handle:
    """An opaque handle of the core, closed once by close() or with the object."""

    handle = None
    _close_name = ""
    _request_type = None  # the structure its selects take

    def state(self) -> _CallState:
        """This thread's request and answer structures (made on first use)."""
        state = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = _CallState(self._request_type)
        return state

    def close(self):
        if self.handle is not None:
            getattr(self.lib, self._close_name)(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


class NativeClient(_Handle):
    """A topk_rpc_client: one gRPC channel of the C++ client."""

    _close_name = "topk_rpc_client_close"
    _request_type = InlineSelect

    def __init__(self, lib, target: str, max_send_message_bytes: int = 0,
                 max_receive_message_bytes: int = 0,
                 load_balancing_policy: Optional[str] = None, tls=None):
        """tls: a topk_client.TlsOptions (checked there), or None: plaintext."""
        self.lib = lib
        self.handle = None
        options = ClientOptions(target.encode(), max_send_message_bytes or 0,
                                max_receive_message_bytes or 0,
                                load_balancing_policy.encode() if load_balancing_policy else None)
        handle = C.c_void_p()
        message = C.create_string_buffer(MESSAGE_BYTES)
        if tls is None:
            code = lib.topk_rpc_client_open(C.byref(options), C.byref(handle), message,
                                            MESSAGE_BYTES)
        else:
            # The structure holds the bytes objects (ctypes keeps them) for the call.
            pem = ClientTls(tls.root_certificates, tls.certificate_chain, tls.private_key,
                            tls.server_name.encode() if tls.server_name else None)
            code = getattr(lib, _TLS_OPEN)(C.byref(options), C.byref(pem), C.byref(handle),
                                           message, MESSAGE_BYTES)
        if code != 0:
            raise CallError(code, _text(message))
        self.handle = handle
        self._local = threading.local()


    def select_inline(self, state: _CallState) -> None:
        """Sends state.request; the answer lands in state.answer's buffers."""
        code = self.lib.topk_rpc_select_inline(self.handle, state.request_ref, state.answer_ref,
                                               state.message, MESSAGE_BYTES)
        if code != 0:
            raise CallError(code, _text(state.message))



class NativeSession(_Handle):
    """A topk_rpc_session: a region session and its SelectPipeline stream
    (or unary selects), on a NativeClient's channel."""

    _close_name = "topk_rpc_session_close"
    _request_type = RefSelect

    def __init__(self, client: NativeClient, unary: bool = False):
        self.lib = client.lib
        self.handle = None
        self._error = CallError if unary else SelectError
        handle = C.c_void_p()
        message = C.create_string_buffer(MESSAGE_BYTES)
        code = self.lib.topk_rpc_session_open(client.handle, CALL_UNARY if unary else
                                              CALL_PIPELINE, C.byref(handle), message,
                                              MESSAGE_BYTES)
        if code != 0:
            raise CallError(code, _text(message))
        self.handle = handle
        self.id = self.lib.topk_rpc_session_id(handle).decode()
        self._local = threading.local()


    def select(self, state: _CallState, answer: bool) -> None:
        """Sends state.request (an answer by reference, or into
        state.answer's buffers when `answer`)."""
        code = self.lib.topk_rpc_select_ref(self.handle, state.request_ref,
                                            state.answer_ref if answer else None,
                                            state.message, MESSAGE_BYTES)
        if code != 0:
            raise self._error(code, _text(state.message))

    def _control(self, function, *args):
        message = C.create_string_buffer(MESSAGE_BYTES)
        code = function(self.handle, *args, message, MESSAGE_BYTES)
        if code != 0:
            raise CallError(code, _text(message))

    def register_shm(self, name: str, shm_name: str, offset: int, byte_size: int):
        self._control(self.lib.topk_rpc_register_shm, name.encode(), shm_name.encode(), offset,
                      byte_size)

    def register_cuda_ipc(self, name: str, handle: bytes, offset: int, byte_size: int,
                          uuid: str, ordinal: int):
        self._control(self.lib.topk_rpc_register_cuda_ipc, name.encode(), handle, len(handle),
                      offset, byte_size, uuid.encode(), ordinal)

    def register_cuda_event(self, name: str, handle: bytes, uuid: str, ordinal: int):
        self._control(self.lib.topk_rpc_register_cuda_event, name.encode(), handle, len(handle),
                      uuid.encode(), ordinal)

    def unregister(self, name: str):
        self._control(self.lib.topk_rpc_unregister, name.encode())

    def unregister_all(self) -> int:
        count = C.c_int32()
        self._control(self.lib.topk_rpc_unregister_all, C.byref(count))
        return count.value

