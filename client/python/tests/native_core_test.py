#!/usr/bin/env python3
"""The native RPC core (libtopk_client_c.so) against a real topk-server (CPU
backend, --enable_regions):

* its C ABI's own argument checks, called through ctypes: each refusal is
  INVALID_ARGUMENT (or OUT_OF_RANGE for a reply that does not fit) with a
  message naming the field, and the row where there is one; messages are
  truncated to the caller's buffer, NUL-terminated;
* the server's refusals reach Python with the server's words on both paths:
  the same code, details and exception type from grpcio and the core;
* exact answers from both paths, the same indices with deterministic ties;
* the fallback: a package without the library uses grpcio; native=True, a
  missing TOPK_CLIENT_LIBRARY or a file that is no library are errors; a
  broken library found by the search warns and falls back; TOPK_CLIENT_NATIVE=0
  turns the core off.

Usage: native_core_test.py --target 127.0.0.1:PORT --library PATH
"""
import argparse
import ctypes as C
import os
import shutil
import subprocess
import sys
import tempfile

import grpc
import numpy as np

from topk_client import CallError, SelectError, TopKClient, ZeroCopyClient
from topk_client import _native

INVALID_ARGUMENT, OUT_OF_RANGE = 3, 11


def expect_code(call, code, *words):
    """call(message buffer) returns a status code: check it and the message."""
    message = C.create_string_buffer(_native.MESSAGE_BYTES)
    got = call(message)
    text = message.value.decode()
    assert got == code, (got, text)
    for word in words:
        assert word in text, (word, text)
    return text


def check_abi(lib, target):
    n = _native.MESSAGE_BYTES
    assert lib.topk_rpc_abi_version() == _native.ABI_VERSION
    handle = C.c_void_p()
    expect_code(lambda m: lib.topk_rpc_client_open(None, C.byref(handle), m, n),
                INVALID_ARGUMENT, "options: NULL")
    options = _native.ClientOptions(b"", 0, 0, None)
    expect_code(lambda m: lib.topk_rpc_client_open(C.byref(options), C.byref(handle), m, n),
                INVALID_ARGUMENT, "options.target: NULL or empty")
    options = _native.ClientOptions(target.encode(), 0, 0, b"no such policy!")
    expect_code(lambda m: lib.topk_rpc_client_open(C.byref(options), C.byref(handle), m, n),
                INVALID_ARGUMENT, "load_balancing_policy")
    client = _native.NativeClient(lib, target)
    session_handle = C.c_void_p()
    expect_code(lambda m: lib.topk_rpc_session_open(client.handle, 7, C.byref(session_handle),
                                                    m, n),
                INVALID_ARGUMENT, "call_path: 7 is neither")
    session = _native.NativeSession(client)
    assert len(session.id) >= 16, session.id
    expect_code(lambda m: lib.topk_rpc_register_shm(session.handle, None, b"/x", 0, 16, m, n),
                INVALID_ARGUMENT, "name: NULL or empty")
    expect_code(lambda m: lib.topk_rpc_register_cuda_ipc(session.handle, b"g", None, 64, 0, 16,
                                                         None, 0, m, n),
                INVALID_ARGUMENT, "handle: NULL with bytes > 0")
    # A region the server refuses: its code and words (not this library's).
    expect_code(lambda m: lib.topk_rpc_register_shm(session.handle, b"r", b"/no-such-object",
                                                    0, 64, m, n),
                INVALID_ARGUMENT, "/no-such-object")

    def ref_select(fill, answer=None):
        request = _native.RefSelect(k=4, num_rows=1, scores=_native.Ref(b"r", 0))
        lengths = (C.c_int32 * 1)(8)
        request.lengths, request.num_lengths = C.addressof(lengths), 1
        fill(request)
        # The lengths ride on the closure: the request holds only their address.
        return lambda m, held=lengths: lib.topk_rpc_select_ref(
            session.handle, C.byref(request), answer and C.byref(answer), m, n)

    out = np.zeros(16, np.int32)
    answer = _native.Answer(indices=out.ctypes.data, capacity=out.size)
    expect_code(ref_select(lambda r: setattr(r.scores, "region", None), answer),
                INVALID_ARGUMENT, "request.scores.region: NULL")
    expect_code(ref_select(lambda r: setattr(r, "dtype", 9), answer), INVALID_ARGUMENT,
                "request.dtype: 9 is not a score type")
    expect_code(ref_select(lambda r: setattr(r, "options", 8), answer), INVALID_ARGUMENT,
                "request.options: unknown bits 0x8")
    expect_code(ref_select(lambda r: setattr(r, "num_rows", -2), answer), INVALID_ARGUMENT,
                "request.num_rows: -2")
    expect_code(ref_select(lambda r: setattr(r, "lengths", None), answer), INVALID_ARGUMENT,
                "request.lengths: NULL with num_lengths 1")
    expect_code(ref_select(lambda r: None, None), INVALID_ARGUMENT,
                "answer.indices: NULL, but the answer comes back in the reply")
    expect_code(ref_select(lambda r: setattr(r.out_values, "region", b"v"), answer),
                INVALID_ARGUMENT, "request.out_values: given without request.out_indices")
    # Sent: the server refuses the unknown region, naming it.
    expect_code(ref_select(lambda r: None, answer), 5, "r")

    rows = np.arange(20, dtype=np.float32)
    starts = (C.c_void_p * 2)(rows.ctypes.data, rows.ctypes.data + 40)

    def inline(lengths, fill=lambda r: None, answer=answer, buffer_bytes=n):
        lengths = (C.c_int32 * 2)(*lengths)
        request = _native.InlineSelect(k=4, num_rows=2, rows=C.addressof(starts),
                                       lengths=C.addressof(lengths))
        fill(request)
        return lambda m, held=lengths: lib.topk_rpc_select_inline(
            client.handle, C.byref(request), C.byref(answer), m, buffer_bytes)

    expect_code(inline([10, -1]), INVALID_ARGUMENT, "request.lengths[1]: -1 (>= 0)")
    starts[1] = None
    expect_code(inline([10, 5]), INVALID_ARGUMENT, "request.rows[1]: NULL for a row of 5")
    starts[1] = rows.ctypes.data + 40
    expect_code(inline([10, 5], lambda r: setattr(r, "options", _native.RETURN_VALUES)),
                INVALID_ARGUMENT, "answer.values: NULL, but values were asked for")
    small = _native.Answer(indices=out.ctypes.data, capacity=5)
    expect_code(inline([10, 10], answer=small), OUT_OF_RANGE,
                "answer.capacity: 5 elements for the reply's 2 x 4")
    text = expect_code(inline([10, -1], buffer_bytes=8), INVALID_ARGUMENT)
    assert text == "request", text  # 7 bytes and the NUL
    # The server's refusal of a row, with its row.
    expect_code(inline([10, 10], lambda r: setattr(r, "k", 0)), INVALID_ARGUMENT, "k")
    assert expect_code(inline([10, 10]), 0) == ""
    assert list(out[:8]) and sorted(out[:4]) == [6, 7, 8, 9] and sorted(out[4:8]) == [6, 7, 8, 9]
    session.close()
    client.close()


def refusal(call):
    try:
        call()
    except grpc.RpcError as e:
        return type(e), e.code(), e.details()
    raise AssertionError("accepted")


def check_parity(target):
    """The same refusals and answers over grpcio and the core."""
    rng = np.random.default_rng(3)
    rows = [rng.standard_normal(3000).astype(np.float32), rng.standard_normal(70000)]
    both = [TopKClient(target, native=native) for native in (False, True)]
    assert [c.native for c in both] == [False, True]
    # A row over the server's max_width (65536): refused by the server, row named.
    seen = [refusal(lambda: c.select(rows, 8)) for c in both]
    assert seen[0][1:] == seen[1][1:], seen
    assert seen[0][1] == grpc.StatusCode.INVALID_ARGUMENT and "(row 1)" in seen[0][2], seen
    assert issubclass(seen[1][0], CallError) and not issubclass(seen[1][0], SelectError)
    matrix = np.round(rng.standard_normal((5, 4000)) * 4).astype(np.float32)  # ties
    lengths = [4000, 0, 7, 2500, 3999]
    answers = [c.select(matrix, 64, lengths=lengths, deterministic=True, return_values=True)
               for c in both]
    assert np.array_equal(answers[0].indices, answers[1].indices)
    assert np.array_equal(answers[0].values, answers[1].values, equal_nan=True)
    assert answers[1].indices.flags.writeable and answers[1].indices.shape == (5, 64)
    for c in both:
        c.close()

    for call in ("pipeline", "unary"):
        clients = [ZeroCopyClient(target, call=call, native=native) for native in (False, True)]
        seen = []
        for zc in clients:
            scores = zc.shared_array((4, 1000), np.float32)
            scores[:] = rng.standard_normal((4, 1000))
            out = zc.shared_array((4, 16), np.int32)
            seen.append(refusal(lambda: zc.select(scores, [1000, 1000, -3, 5], 16, out=out)))
            result = zc.select(scores, np.array([1000, 10, 0, 999]), 16, sorted=True)
            assert result.shape == (4, 16) and np.all(result[2] == -1) and np.all(result[1, 10:] == -1)
            assert [r.name for r in zc.session.list()] == ["host0", "host1"]
            assert zc.session.unregister_all() == 2
        assert seen[0][1:] == seen[1][1:], seen
        assert "region_rows.lengths[2] = -3 is negative (row 2)" in seen[0][2], seen
        assert (seen[1][0] is SelectError) == (call == "pipeline"), seen
        for zc in clients:
            zc.close()


def check_torch_path(target):
    """The torch path's request building (_select_torch: places, pitch,
    lengths, strides, values, ordering) on both paths, without a GPU: CPU
    tensors viewing the session's shared memory stand in for CUDA tensors,
    the CUDA-only steps (the type check, the IPC export, the stream)
    replaced by their host equivalents. Exact answers, in place."""
    try:
        import torch
    except ImportError:
        return "skipped: no torch"
    import types
    from topk_client import _checks, regions
    rng = np.random.default_rng(11)
    saved = (_checks.score_type, torch.cuda.current_stream)
    _checks.score_type = lambda scores, types_: types_[scores.dtype]
    torch.cuda.current_stream = lambda device=None: types.SimpleNamespace(synchronize=lambda: None)
    try:
        for native in (False, True):
            zc = ZeroCopyClient(target, native=native)
            host = {}
            storage = getattr(torch.Tensor, "untyped_storage", torch.Tensor.storage)  # torch < 2

            def host_ref(tensor, what, zc=zc, host=host, storage=storage):
                region, offset = zc._host_place(host[storage(tensor).data_ptr()], what)
                return regions._Ref(region.name, offset + tensor.storage_offset() *
                                    tensor.element_size())

            zc._cuda_ref = host_ref
            arrays = [zc.shared_array((6, 3000), np.float32), zc.shared_array((6, 40), np.int32),
                      zc.shared_array((6, 40), np.float32)]
            for a in arrays:
                host[storage(torch.from_numpy(a)).data_ptr()] = a
            arrays[0][:] = np.round(rng.standard_normal((6, 3000)) * 4)
            scores, out, values = (torch.from_numpy(a) for a in arrays)
            lengths = [2900, 0, 5, 1500, 2899, 32]  # rows of a (6, 2900) view, pitch 3000
            for _ in range(2):  # the second call: the region cache's hit
                out.fill_(-9)
                got = zc.select(scores[:, :2900], lengths, 32, out=out, values=values,
                                ordering="host", sorted=True)
                assert got is out
                for r, length in enumerate(lengths):
                    want = min(32, length)
                    row = arrays[0][r, :length]
                    chosen = arrays[1][r, :want]
                    assert np.all(arrays[1][r, want:32] == -1) and np.all(arrays[1][r, 32:] == -9)
                    assert len(set(chosen.tolist())) == want and np.all(chosen < length)
                    if want:
                        kth = np.sort(row)[::-1][want - 1]
                        assert row[chosen].min() == kth and np.sum(row > kth) <= want
                        assert np.array_equal(arrays[2][r, :want], row[chosen])
            zc.close()
    finally:
        _checks.score_type, torch.cuda.current_stream = saved
    return "torch path (host stand-ins): exact on both paths"


FALLBACK = """
import os, sys, warnings
from topk_client import TopKClient, ZeroCopyClient
want = sys.argv[1]
if want == "grpcio":
    assert not TopKClient(sys.argv[2]).native and not ZeroCopyClient(sys.argv[2]).native
elif want == "native":
    assert TopKClient(sys.argv[2]).native
elif want == "warns":
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not TopKClient(sys.argv[2]).native
    assert any("native RPC core is unusable" in str(w.message) for w in caught), caught
else:
    try:
        TopKClient(sys.argv[2], native=True if want == "required" else None)
        raise SystemExit("accepted")
    except RuntimeError as e:
        assert want in str(e) or sys.argv[3] in str(e), e
print("ok")
"""


def check_fallback(target, library):
    work = tempfile.mkdtemp()
    try:
        import topk_client
        bare = os.path.join(work, "bare")
        shutil.copytree(os.path.dirname(topk_client.__file__), os.path.join(bare, "topk_client"),
                        ignore=shutil.ignore_patterns("libtopk_client_c.so", "__pycache__"))
        broken = os.path.join(work, "broken")
        shutil.copytree(os.path.join(bare, "topk_client"), os.path.join(broken, "topk_client"))
        with open(os.path.join(broken, "topk_client", "libtopk_client_c.so"), "w") as f:
            f.write("not a library")
        script = os.path.join(work, "fallback.py")
        with open(script, "w") as f:
            f.write(FALLBACK)

        def child(root, want, extra="", **env):
            environment = {k: v for k, v in os.environ.items()
                           if k not in ("TOPK_CLIENT_LIBRARY", "TOPK_CLIENT_NATIVE")}
            environment.update(PYTHONPATH=root, **env)
            done = subprocess.run([sys.executable, script, want, target, extra], env=environment,
                                  capture_output=True, text=True)
            assert done.returncode == 0 and "ok" in done.stdout, (want, env, done.stderr)

        child(bare, "grpcio")                                   # absent: grpcio
        child(bare, "required", "native=True: libtopk_client_c.so not found")
        child(bare, "TOPK_CLIENT_LIBRARY", "/nonexistent", TOPK_CLIENT_LIBRARY="/nonexistent")
        child(bare, "native", TOPK_CLIENT_LIBRARY=library)      # named: found
        child(broken, "warns")                                  # found but broken: grpcio
        child(bare, "cannot be loaded", script, TOPK_CLIENT_LIBRARY=script)
        child(bare, "grpcio", TOPK_CLIENT_LIBRARY=library, TOPK_CLIENT_NATIVE="0")  # off wins
        # A second, different build in a process that loaded one: refused
        # before it loads (two copies of topk.proto would abort libprotobuf).
        other = os.path.join(work, "other.so")
        shutil.copy(library, other)
        with open(other, "ab") as f:
            f.write(b"\0")
        try:
            _native.load_library(other)
            raise AssertionError("a second build was loaded")
        except RuntimeError as e:
            assert "a different build" in str(e), e
        assert _native.load_library(library) is _native.load_library()
    finally:
        shutil.rmtree(work)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--library", required=True)
    args = parser.parse_args()
    check_abi(_native.load_library(args.library), args.target)
    check_parity(args.target)
    print(check_torch_path(args.target))
    check_fallback(args.target, args.library)
    print("native core: ABI checks, server refusals on both paths, exact answers, fallback ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
