#!/usr/bin/env python3
"""TopKClient and AsyncTopKClient against two running topk-servers (CPU):
padded 2-D rows with lengths, asyncio, round_robin over both servers, message
limits, health through the generated stubs, answers as numpy arrays.

    client_test.py PORT_A PORT_B
"""
import asyncio
import sys

import grpc
import numpy as np

from topk_client import AsyncTopKClient, TopKClient, pack_rows
from topk_client.dtypes import bf16_to_float, float_to_bf16


def expected_sets(matrix, lengths, k):
    """Per row: the k-th largest value and the indices strictly above it
    (exactness as a set with ties: every index above must be chosen, the rest
    from those equal to the boundary)."""
    out = []
    for row, n in zip(matrix, lengths):
        valid = row[:n]
        if n <= k:
            out.append((None, set(range(n))))
            continue
        boundary = np.sort(valid)[::-1][k - 1]
        out.append((boundary, set(np.flatnonzero(valid > boundary).tolist())))
    return out


def check_exact(result, matrix, lengths, k):
    assert isinstance(result.indices, np.ndarray) and result.indices.dtype == np.int32
    assert result.indices.shape == (len(lengths), k), result.indices.shape
    assert result.indices.flags.writeable
    for r, ((boundary, above), n) in enumerate(zip(expected_sets(matrix, lengths, k), lengths)):
        row = result.indices[r]
        chosen = row[row >= 0]
        assert len(chosen) == min(n, k), (r, len(chosen), n)
        assert (row[len(chosen):] == -1).all(), (r, row)
        assert len(set(chosen.tolist())) == len(chosen) and (chosen < n).all(), r
        if boundary is None:
            assert set(chosen.tolist()) == above, r
        else:
            assert above <= set(chosen.tolist()), r
            assert (matrix[r][chosen] >= boundary).all(), r


def padded_rows(rng, m, n):
    # bf16-like values: many ties at the boundary.
    matrix = np.round(rng.standard_normal((m, n)) * 8).astype(np.float32)
    lengths = np.array([n, 0, 1, n // 2, 37, n - 1][:m], dtype=np.int64)
    matrix[np.arange(n)[None, :] >= lengths[:, None]] = 1e30  # padding must never be chosen
    return matrix, lengths


def test_padded_rows(client, rng):
    matrix, lengths = padded_rows(rng, 6, 5000)
    k = 64
    scores, sent = pack_rows(matrix, lengths)
    assert sent == lengths.tolist() and len(scores) == 4 * int(lengths.sum())
    for call in (client.select, client.select_streaming):
        check_exact(call(matrix, k, lengths=lengths), matrix, lengths, k)
    # Full 2-D rows without lengths, and values as float32 arrays.
    full = rng.standard_normal((3, 2000)).astype(np.float32)
    result = client.select(full, 16, sorted=True, return_values=True)
    check_exact(result, full, [2000] * 3, 16)
    assert result.values.dtype == np.float32
    assert np.array_equal(result.values, -np.sort(-full, axis=1)[:, :16])
    try:
        client.select(matrix, k, lengths=lengths[:3])
        raise AssertionError("3 lengths for 6 rows accepted")
    except ValueError:
        pass


def check_values(result, matrix, k, nan_bits):
    """Values in the input type: the score at each index, bit for bit, and
    the type's quiet NaN at -1 slots."""
    for r in range(matrix.shape[0]):
        for j in range(k):
            i = result.indices[r, j]
            got = result.values[r, j:j + 1].view(np.uint16)[0]
            want = matrix[r, i:i + 1].view(np.uint16)[0] if i >= 0 else nan_bits
            assert got == want, (r, j, i, got, want)


def test_half_precision(client, rng):
    """FP16 as numpy float16, BF16 as torch.bfloat16 tensors when torch is
    importable, else as uint16 patterns with dtype="bf16": half the bytes on
    the wire, exact answers, values in the input type."""
    matrix, lengths = padded_rows(rng, 6, 5000)  # integers: exact in both types, heavy ties
    matrix[matrix > 1e20] = 32768.0               # padding: huge, exact in FP16 and BF16
    k = 64
    sent = 2 * int(lengths.sum())
    half = matrix.astype(np.float16)
    before = client.stats().bytes_in
    result = client.select(half, k, lengths=lengths, return_values=True)
    assert client.stats().bytes_in - before == sent, "FP16 rows must travel as 2 bytes each"
    check_exact(result, half, lengths, k)
    assert result.values.dtype == np.float16
    check_values(result, half, k, 0x7E00)
    check_exact(client.select_streaming(half, k, lengths=lengths, chunk_bytes=1001), half,
                lengths, k)

    bits = float_to_bf16(matrix)
    widened = bf16_to_float(bits)
    assert np.array_equal(widened, matrix)  # small integers and 2^15 are exact in BF16
    try:
        import torch
        rows = torch.from_numpy(matrix).to(torch.bfloat16)
        result = client.select(rows, k, lengths=lengths, return_values=True)
    except ImportError:
        result = client.select(bits, k, lengths=lengths, return_values=True, dtype="bf16")
    check_exact(result, widened, lengths, k)
    assert result.values.dtype == np.uint16
    check_values(result, bits, k, 0x7FC0)
    # FP32 rows rounded to BF16 on the client give the same answer.
    rounded = client.select(matrix, k, lengths=lengths, dtype="bf16", deterministic=True)
    exact = client.select(bits, k, lengths=lengths, dtype="bf16", deterministic=True)
    assert np.array_equal(rounded.indices, exact.indices)
    try:
        client.select(bits, k, lengths=lengths)
        raise AssertionError("uint16 rows without a dtype accepted")
    except ValueError:
        pass


def test_health(client):
    assert client.is_serving()
    try:
        client.is_serving("no.such.Service")
        raise AssertionError("unknown service reported")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND, e


def test_message_limit(port, rng):
    matrix = rng.standard_normal((4, 4096)).astype(np.float32)  # 64 KiB of scores
    with TopKClient(f"127.0.0.1:{port}", max_send_message_bytes=16 << 10) as small:
        try:
            small.select(matrix, 8)
            raise AssertionError("a 64 KiB request passed a 16 KiB send limit")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
        # The stream is chunked below the limit.
        check_exact(small.select_streaming(matrix, 8, chunk_bytes=8 << 10), matrix, [4096] * 4, 8)


def test_round_robin(port_a, port_b, rng):
    before = [TopKClient(f"127.0.0.1:{p}").stats().requests for p in (port_a, port_b)]
    rows = [rng.standard_normal(1000).astype(np.float32)]
    with TopKClient(f"ipv4:127.0.0.1:{port_a},127.0.0.1:{port_b}",
                    load_balancing_policy="round_robin") as spread:
        spread.wait_for_serving(10)
        for _ in range(20):
            check_exact(spread.select(rows, 4), rows, [1000], 4)
    after = [TopKClient(f"127.0.0.1:{p}").stats().requests for p in (port_a, port_b)]
    served = [a - b for a, b in zip(after, before)]
    assert sum(served) == 20 and min(served) >= 5, served


async def async_selects(port, rng):
    matrices = [padded_rows(rng, 6, 3000) for _ in range(8)]
    async with AsyncTopKClient(f"127.0.0.1:{port}") as topk:
        await topk.wait_for_serving(10)
        assert await topk.is_serving()
        results = await asyncio.gather(
            *(topk.select(m, 32, lengths=n) for m, n in matrices),
            topk.select_streaming(matrices[0][0], 32, lengths=matrices[0][1], chunk_bytes=4096))
        for result, (m, n) in zip(results, matrices + matrices[:1]):
            check_exact(result, m, n, 32)
        assert (await topk.server_info()).backend == "cpu"


def main():
    port_a, port_b = sys.argv[1:3]
    rng = np.random.default_rng(7)
    with TopKClient(f"127.0.0.1:{port_a}") as client:
        client.wait_for_serving(10)
        test_padded_rows(client, rng)
        test_half_precision(client, rng)
        test_health(client)
    test_message_limit(port_a, rng)
    test_round_robin(port_a, port_b, rng)
    asyncio.run(async_selects(port_b, rng))
    print("python client: padded rows, fp16/bf16, health, limits, round_robin, asyncio ok")


if __name__ == "__main__":
    main()
