"""ZeroCopyClient over POSIX shared memory against a real topk-server (CPU
backend): numpy rows, lengths and answers by reference, every answer checked
for exactness (set-valued with ties, -1 sentinels, distinct in-range
indices), on a SelectPipeline stream and with unary calls; a request the
server refuses raises with its status and the stream goes on; and arrays
outside the session's shared memory refused.

Runs on whichever path the package picks (the native core when it finds
libtopk_client_c.so, else grpcio) and says which.

Usage: regions_shm_test.py --target unix:/path
"""
import argparse
import sys

import numpy as np

import grpc

from topk_client import RegionError, SelectError, ZeroCopyClient
from topk_client.dtypes import bf16_to_float, float_to_bf16


def check_row(row: np.ndarray, length: int, k: int, got: np.ndarray, values=None):
    """Exact top-k of row[:length] as a set: ties at the k-th value either way."""
    want = min(k, length)
    assert np.all(got[want:] == -1), f"sentinels: {got[want:]}"
    chosen = got[:want]
    assert np.all((chosen >= 0) & (chosen < length)), "index out of range"
    assert len(set(chosen.tolist())) == want, "duplicate index"
    if want and want < length:
        kth = np.sort(row[:length])[::-1][want - 1]
        assert row[chosen].min() == kth, "not the k largest"
        assert np.sum(row[:length] > kth) <= want, "a larger value was left out"
    if values is not None:
        assert np.array_equal(values[:want], row[chosen]), "values do not match"
        assert np.all(np.isnan(values[want:k])), "value sentinels"


def run(target: str, call: str):
    rng = np.random.default_rng(7)
    m, n, k = 9, 5000, 100
    with ZeroCopyClient(target, call=call) as topk:
        scores = topk.shared_array((m, n), np.float32)
        scores[:] = np.nan  # anything read past a row's length would fail the request
        lengths = rng.integers(0, n + 1, size=m).astype(np.int32)
        lengths[0], lengths[1] = 0, k // 2  # an empty row and a row shorter than k
        for r in range(m):
            # bf16-like values: many ties
            scores[r, :lengths[r]] = np.round(rng.standard_normal(lengths[r]) * 8) / 8
        out = topk.shared_array((m, k + 3), np.int32)
        out[:] = 12345
        values = topk.shared_array((m, k + 3), np.float32)

        # Lengths inline, answer in place with values, at a stride of k + 3.
        result = topk.select(scores, lengths, k, out=out, values=values)
        assert result is out
        for r in range(m):
            check_row(scores[r], lengths[r], k, out[r, :k], values[r])
            assert np.all(out[r, k:] == 12345), "wrote past k"

        # Lengths in shared memory too; answer in the reply.
        shared_lengths = topk.shared_array((m,), np.int32)
        shared_lengths[:] = lengths
        indices = topk.select(scores, shared_lengths, k, sorted=True)
        for r in range(m):
            check_row(scores[r], lengths[r], k, indices[r])
            chosen = indices[r][indices[r] >= 0]
            assert np.all(np.diff(scores[r][chosen]) <= 0), "not sorted"

        # A plain numpy array is not shared: refused with a clear error.
        try:
            topk.select(np.zeros((2, 10), np.float32), [10, 10], 4)
            raise AssertionError("a private array was accepted")
        except RegionError as e:
            assert "shared_array" in str(e)
        names = [r.name for r in topk.session.list()]
        assert len(names) == 4, names

        # A k over the server's max_k: refused with the unary call's status,
        # and the next request on the same stream is answered.
        try:
            topk.select(scores, lengths, 100000)
            raise AssertionError("k = 100000 was accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
            assert "max_k" in e.details(), e.details()
            assert isinstance(e, SelectError) == (call == "pipeline"), type(e)
        indices = topk.select(scores, lengths, k)
        for r in range(m):
            check_row(scores[r], lengths[r], k, indices[r])

        # 16-bit rows in shared memory: float16, and BF16 as uint16 patterns
        # (the same values: multiples of 1/8 below 64 are exact in both).
        # Values come back in the rows' type, 2 bytes each.
        for dtype, element in (("fp16", np.float16), ("bf16", np.uint16)):
            half = topk.shared_array((m, n), element)
            half[:] = np.float16(np.nan) if element is np.float16 else np.uint16(0x7FC0)
            for r in range(m):
                row = scores[r, :lengths[r]]
                half[r, :lengths[r]] = row if element is np.float16 else float_to_bf16(row)
            half_values = topk.shared_array((m, k + 3), element)
            result = topk.select(half, lengths, k, out=out, values=half_values, dtype=dtype)
            assert result is out
            widened = half.astype(np.float32) if element is np.float16 else bf16_to_float(half)
            for r in range(m):
                check_row(widened[r], lengths[r], k, out[r, :k])
                chosen = out[r, :min(k, lengths[r])]
                assert np.array_equal(half_values[r, :len(chosen)].view(np.uint16),
                                      half[r, chosen].view(np.uint16)), "values in the type"
                nan = 0x7E00 if element is np.float16 else 0x7FC0
                assert np.all(half_values[r, len(chosen):k].view(np.uint16) == nan), "NaN slots"
        path = "native core" if topk.native else "grpcio"
    print(f"regions over shared memory ({call}, {path}): exact")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    args = parser.parse_args()
    for call in ("pipeline", "unary"):
        run(args.target, call)
    return 0


if __name__ == "__main__":
    sys.exit(main())
