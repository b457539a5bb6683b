"""InProcessSelector where CI runs it: no GPU, no libtopk_c.so, maybe no torch
or grpc. Checks the errors a user there gets (no torch, no library, a
library that is not the C ABI), the loader's search order, the plan
buckets, and the argument checks shared with ZeroCopyClient (on stand-in
tensors, so torch is not needed). The GPU half: inprocess_gpu_test.py.

Usage: inprocess_test.py (topk_client importable, e.g. PYTHONPATH=build/python)
"""
import os
import sys
import tempfile

import topk_client
from topk_client import InProcessSelector, RegionError, _checks, inprocess


def expect(error_type, fragments, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except error_type as e:
        for fragment in fragments:
            assert fragment in str(e), f"{fragment!r} not in {e!r}"
        return e
    raise AssertionError(f"{call} did not raise {error_type.__name__}")


def test_constructor_without_torch_or_gpu():
    try:
        import torch
    except ImportError:
        expect(ImportError, ["InProcessSelector needs torch"], InProcessSelector)
        return "no torch: ImportError naming torch"
    if not torch.cuda.is_available():
        expect(RuntimeError, ["InProcessSelector: no CUDA device"], InProcessSelector)
        return "torch without CUDA: RuntimeError"
    return "torch with CUDA here: the GPU test covers the constructor"


def test_library_not_found(environ):
    with tempfile.TemporaryDirectory() as empty:
        environ.pop("TOPK_LIBRARY", None)
        environ["TOPK_PREFIX"] = os.path.join(empty, "a")
        environ["CMAKE_PREFIX_PATH"] = os.path.join(empty, "b") + ":" + os.path.join(empty, "c")
        candidates = inprocess.library_candidates()
        package_dir = os.path.dirname(inprocess.__file__)
        # The search order the docstring promises.
        assert candidates[0] == os.path.join(package_dir, "libtopk_c.so"), candidates
        assert candidates[1:7] == [os.path.join(empty, p, lib, "libtopk_c.so")
                                   for p in "abc" for lib in ("lib", "lib64")], candidates
        assert candidates[7] == "/usr/local/lib/libtopk_c.so", candidates
        if not any(os.path.isfile(p) for p in candidates):
            e = expect(RuntimeError, ["libtopk_c.so not found: looked in",
                                      os.path.join(empty, "b", "lib", "libtopk_c.so")],
                       inprocess.load_library)
            assert package_dir in str(e), e
        # An explicit path or TOPK_LIBRARY is the only candidate: a missing
        # one is an error, not a reason to load some other copy.
        missing = os.path.join(empty, "nowhere", "libtopk_c.so")
        assert inprocess.library_candidates(missing) == [missing]
        expect(RuntimeError, ["not found: the path given", missing], inprocess.load_library,
               missing)
        environ["TOPK_LIBRARY"] = missing
        assert inprocess.library_candidates() == [missing]
        expect(RuntimeError, ["not found: TOPK_LIBRARY", missing], inprocess.load_library)
        environ.pop("TOPK_LIBRARY")


def test_library_that_is_not_the_abi():
    import _ctypes  # a shared object that surely loads, and has no topk_api_version
    path = _ctypes.__file__
    if not path.endswith(".so"):
        return "skipped: _ctypes is built in"
    expect(RuntimeError, [path, "not libtopk_c"], inprocess.load_library, path)
    return "a foreign .so: refused"


def test_plan_buckets():
    assert [inprocess.round_up_pow2(n) for n in (0, 1, 2, 3, 5, 4096, 4097)] == \
        [1, 1, 2, 4, 8, 4096, 8192]
    a = inprocess.plan_bucket(0, 2048, 600, 100000, 0, False, False)
    assert a == (0, 2048, 1024, 131072, 0, False, False), a
    assert inprocess.plan_bucket(0, 2048, 1000, 131072, 0, False, False) == a  # one plan
    assert inprocess.plan_bucket(0, 2048, 1025, 131072, 0, False, False) != a
    assert inprocess.plan_bucket(0, 2048, 600, 100000, 1, False, False) != a  # bf16
    assert inprocess.plan_bucket(0, 2048, 600, 100000, 0, True, False) != a   # sorted
    assert inprocess.plan_bucket(1, 2048, 600, 100000, 0, False, False) != a  # device


class Device:
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Device) and other.name == self.name

    def __str__(self):
        return self.name


class Tensor:
    """Enough of a torch tensor for the shared checks (which take torch's
    dtypes from the caller: strings here)."""

    def __init__(self, shape, strides, dtype="float32", device=Device("cuda:0"), cuda=True,
                 contiguous=True):
        self.shape, self._strides, self.dtype, self.device = shape, strides, dtype, device
        self.ndim, self.is_cuda, self._contiguous = len(shape), cuda, contiguous

    def stride(self, dim):
        return self._strides[dim]

    def is_contiguous(self):
        return self._contiguous


Tensor.__module__ = "torch.stand_in"  # what is_torch() looks at


def test_shared_checks():
    assert topk_client.RegionError is _checks.RegionError is RegionError
    assert _checks.is_torch(Tensor((1, 1), (1, 1)))  # strides in elements, as torch's
    expect(RegionError, ["scores: a 2-D array with contiguous rows"], _checks.check_rows,
           Tensor((400,), (1,)))
    expect(RegionError, ["scores: a 2-D array with contiguous rows"], _checks.check_rows,
           Tensor((4, 100), (1, 4)))
    _checks.check_rows(Tensor((4, 100), (128, 1)))  # any pitch
    types = {"float32": 0, "bfloat16": 1}
    assert _checks.score_type(Tensor((4, 100), (128, 1), "bfloat16"), types) == 1
    expect(RegionError, ["scores: a float32, bfloat16 or float16 CUDA tensor"],
           _checks.score_type, Tensor((4, 100), (128, 1), "float64"), types)
    expect(RegionError, ["CUDA tensor"], _checks.score_type,
           Tensor((4, 100), (128, 1), cuda=False), types)
    scores = Tensor((4, 100), (128, 1))
    _checks.check_device_lengths(Tensor((4,), (1,), "int32"), scores.device, "int32")
    for bad in (Tensor((4,), (1,), "int64"), Tensor((4,), (1,), "int32", Device("cuda:1")),
                Tensor((4,), (2,), "int32", contiguous=False)):
        expect(RegionError, ["lengths: a contiguous int32 tensor on the scores' GPU"],
               _checks.check_device_lengths, bad, scores.device, "int32")
    out = Tensor((4, 16), (16, 1), "int32")
    _checks.check_outputs(scores, 16, out, None, "int32")
    for bad in (Tensor((4, 8), (8, 1), "int32"), Tensor((3, 16), (16, 1), "int32"),
                Tensor((4, 16), (16, 1), "float32"), Tensor((4, 16), (1, 4), "int32"),
                Tensor((4, 16), (16, 1), "int32", Device("cuda:1"))):
        expect(RegionError, ["out: (4, >= 16) int32 on cuda:0 with contiguous rows"],
               _checks.check_outputs, scores, 16, bad, None, "int32")
    expect(RegionError, ["values: (4, >= 16) float32 on cuda:0"], _checks.check_outputs,
           scores, 16, out, Tensor((4, 16), (16, 1), "bfloat16"), "int32")
    _checks.check_values_stride(out, Tensor((4, 16), (16, 1)))
    expect(RegionError, ["values: must have the same row stride as out"],
           _checks.check_values_stride, out, Tensor((4, 32), (32, 1)))


def test_zero_copy_client_uses_the_shared_checks():
    try:
        from topk_client import regions
    except ImportError as e:  # no grpc in this interpreter: the RPC path is not here
        return f"skipped: {e}"
    assert regions.RegionError is RegionError
    assert regions._checks is _checks
    import numpy as np
    client = regions.ZeroCopyClient.__new__(regions.ZeroCopyClient)  # no server needed
    expect(RegionError, ["scores: a 2-D array with contiguous rows"], client.select,
           np.zeros((4, 100), np.float32)[:, ::2], [1, 2, 3, 4], 8)
    return "ZeroCopyClient: the same messages"


def test_select_checks_match_zero_copy_with_torch():
    """With torch here (a CPU build: no CUDA), both paths refuse the same
    tensors with the same error and message."""
    try:
        import torch
    except ImportError:
        return "skipped: no torch"
    import types
    selector = InProcessSelector.__new__(InProcessSelector)  # no GPU, no library needed
    selector._torch = torch
    selector._types = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
    paths = [("in process", selector.select)]
    try:
        from topk_client import regions
        client = regions.ZeroCopyClient.__new__(regions.ZeroCopyClient)
        client.session = types.SimpleNamespace(id="unused")
        paths.append(("zero copy", client.select))
    except ImportError:
        pass
    lengths = torch.full((4,), 100, dtype=torch.int32)
    cases = [(torch.zeros(400), "scores: a 2-D array with contiguous rows"),
             (torch.zeros(4, 200)[:, ::2], "scores: a 2-D array with contiguous rows"),
             (torch.zeros(4, 100), "scores: a float32, bfloat16 or float16 CUDA tensor"),
             (torch.zeros(4, 100, dtype=torch.float64), "scores: a float32, bfloat16 or "
              "float16 CUDA tensor")]
    for scores, message in cases:
        for name, select in paths:
            e = expect(RegionError, [message], select, scores, lengths, 8)
            assert str(e) == message, (name, str(e))
    return f"torch tensors: {' and '.join(n for n, _ in paths)} refuse alike"


def test_rpc_names_without_grpc():
    """The in-process names import without grpc; the RPC ones then say what
    they need instead of failing the package's import."""
    try:
        import grpc  # noqa: F401
    except ImportError:
        e = expect(ImportError, ["topk_client.TopKClient is unavailable", "grpcio>=1.51",
                                 "protobuf>=4.21", "numpy>=1.21", "/usr/bin/python3"],
                   lambda: topk_client.TopKClient)
        try:
            from topk_client import ZeroCopyClient  # noqa: F401
        except ImportError as f:
            assert "ZeroCopyClient is unavailable" in str(f), f
        else:
            raise AssertionError("ZeroCopyClient imported without grpc")
        return f"no grpc: the RPC names say what they need ({str(e)[:40]}...)"
    try:
        client_class = topk_client.TopKClient
    except ImportError as e:  # a source folder without the generated stubs
        assert "is unavailable" in str(e) and "generated stubs" in str(e), e
        return "grpc here, no stubs: the RPC names say so"
    assert isinstance(client_class, type), client_class
    return "grpc here: the RPC names import"


def main():
    environ = os.environ
    saved = dict(environ)
    results = []
    try:
        results.append(test_constructor_without_torch_or_gpu())
        test_library_not_found(environ)
        results.append(test_library_that_is_not_the_abi())
        test_plan_buckets()
        test_shared_checks()
        results.append(test_zero_copy_client_uses_the_shared_checks())
        results.append(test_rpc_names_without_grpc())
        results.append(test_select_checks_match_zero_copy_with_torch())
    finally:
        environ.clear()
        environ.update(saved)
    for line in results:
        print(line)
    print("in-process selector without a GPU: errors and checks as documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
