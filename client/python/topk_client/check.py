"""python -m topk_client.check: what this installation found, and one
select checked.

Prints the package's folder, the C ABI library (libtopk_c.so: where, its
version), the native RPC core (libtopk_client_c.so), torch, the GPU and the
driver; then, where torch sees a GPU and the library loads, one select
through torch.ops.topk.select on rows with ties and ragged lengths, checked
against torch.topk's values (the same multiset per row, -1 past the
length, distinct in-range indices). Exit status: 0 when everything found
works (a machine without a GPU or torch: the select is skipped and said
so), 1 when something found fails (a library that does not load, a select
that is not exact), 2 with --require-gpu when there is no GPU to select on.
"""

import argparse
import ctypes
import os
import sys

from topk_client import _library, inprocess


def report(name: str, value: str) -> None:
    print(f"{name:>16}: {value}", flush=True)


def find_selector_library():
    """(path or None, note) of libtopk_c.so as InProcessSelector finds it."""
    candidates = inprocess.library_candidates()
    path = next((p for p in candidates if os.path.isfile(p)), None)
    if path is None:
        return None, "not found (looked in " + ", ".join(candidates) + ")"
    try:
        lib = inprocess.load_library(path)
    except RuntimeError as e:
        return None, f"FAILED: {e}"
    return path, f"{path} (C ABI version {lib.topk_api_version()})"


def find_native_core() -> str:
    candidates = _library.candidates("libtopk_client_c.so", "TOPK_CLIENT_LIBRARY")
    path = next((p for p in candidates if os.path.isfile(p)), None)
    if path is None:
        return "not found: the RPC paths use grpcio"
    try:
        ctypes.CDLL(path)
    except OSError as e:
        return f"FAILED: {path} does not load ({e})"
    return path


def driver_version() -> str:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "none (no libcuda.so.1)"
    version = ctypes.c_int()
    if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return "libcuda.so.1 present, cuDriverGetVersion failed"
    return f"CUDA {version.value // 1000}.{version.value % 1000 // 10} (libcuda.so.1)"


def verified_select(torch) -> str:
    """One select on the GPU, checked against torch.topk; raises AssertionError."""
    import topk_client.torch_ops  # noqa: F401 (torch.ops.topk)
    generator = torch.Generator().manual_seed(9)
    m, n, k = 8, 65536, 2048
    scores = ((torch.randn(m, n, generator=generator) * 32).round() / 32).cuda()  # ties
    lengths = torch.randint(0, n + 1, (m,), generator=generator, dtype=torch.int32)
    lengths[0], lengths[1] = 0, k // 2  # an empty row, a row shorter than k
    lengths = lengths.cuda()
    indices = torch.ops.topk.select(scores, lengths, k).cpu()
    scores, lengths = scores.cpu(), lengths.cpu()
    for r in range(m):
        length, live = int(lengths[r]), min(k, int(lengths[r]))
        row = indices[r]
        assert bool((row[live:] == -1).all()), f"row {r}: not -1 past its {live} picks"
        picked = row[:live].long()
        assert bool(((picked >= 0) & (picked < length)).all()), f"row {r}: index out of range"
        assert picked.unique().numel() == live, f"row {r}: repeated indices"
        want = torch.topk(scores[r, :length], live).values.sort().values
        assert torch.equal(scores[r][picked].sort().values, want), f"row {r}: not the top {k}"
    return f"exact ({m} rows up to {n}, k {k}, ties, an empty row, one shorter than k)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topk_client.check", description=__doc__)
    parser.add_argument("--require-gpu", action="store_true",
                        help="exit 2 when there is no GPU (or torch) to select on")
    args = parser.parse_args(argv)
    failed = False
    report("package", os.path.dirname(os.path.abspath(inprocess.__file__)))
    path, note = find_selector_library()
    failed |= note.startswith("FAILED")
    report("libtopk_c.so", note)
    core = find_native_core()
    failed |= core.startswith("FAILED")
    report("native RPC core", core)
    report("driver", driver_version())
    try:
        import torch
    except ImportError:
        torch = None
    report("torch", torch.__version__ if torch else "not installed")
    gpu = torch is not None and torch.cuda.is_available()
    if gpu:
        props = torch.cuda.get_device_properties(0)
        report("GPU", f"{props.name} (sm_{props.major}{props.minor}, "
                      f"{props.total_memory >> 30} GiB; torch CUDA {torch.version.cuda})")
    else:
        report("GPU", "none visible to torch" if torch else "unknown (no torch)")
    if not gpu or path is None:
        why = "no GPU" if not gpu else "no libtopk_c.so"
        report("select", f"skipped ({why}): the in-process selector needs both")
        if args.require_gpu:
            return 2
        return 1 if failed else 0
    try:
        report("select", verified_select(torch))
    except (AssertionError, RuntimeError, ValueError) as e:
        report("select", f"FAILED: {e}")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
