"""The drop-ins' row arithmetic (topk_client.compat._rows) on numpy arrays,
against plain Python written from the engines' definitions: speculative
decode rows (1-D, (B, 1) and (B, next_n) lengths, rows shorter than zero
and longer than the logits), prefill windows (lengths and packed offsets),
and the refusals naming the argument. No torch or GPU: runs in CI.

Usage: PYTHONPATH=client/python /usr/bin/python3 compat_rows_test.py
"""
import random
import sys

SKIP = 77


def expect_value_error(fragment, call, *args):
    try:
        call(*args)
    except ValueError as e:
        assert fragment in str(e), f"{fragment!r} not in {e!r}"
        return
    raise AssertionError(f"{call.__name__}{args!r} did not raise ValueError")


def reference_decode(seq_lens, next_n, width):
    """Row b * next_n + j of sequence b ends next_n - 1 - j positions before
    the sequence's last one; a per-row table gives each row its own."""
    rows = []
    for b, entry in enumerate(seq_lens):
        for j in range(next_n):
            if isinstance(entry, list) and len(entry) == next_n and next_n > 1:
                length = entry[j]
            else:
                base = entry[0] if isinstance(entry, list) else entry
                length = base - next_n + 1 + j
            rows.append(min(max(length, 0), width))
    return rows


def test_decode_lengths(np, _rows):
    rng = random.Random(3)
    width = 5000
    cases = []
    for next_n in (1, 2, 4, 8):
        one_per_sequence = [rng.randint(0, width + 40) for _ in range(37)]
        one_per_sequence[:4] = [0, 1, next_n - 1, width + 30]  # rows shorter than zero, too long
        cases.append((one_per_sequence, next_n))
        cases.append(([[v] for v in one_per_sequence], next_n))  # (B, 1)
        if next_n > 1:
            per_row = [[rng.randint(-3, width + 40) for _ in range(next_n)] for _ in range(29)]
            per_row[0][0], per_row[0][-1] = -3, width + 9
            cases.append((per_row, next_n))
    for table, next_n in cases:
        seq_lens = np.array(table, dtype=np.int32)
        rows = seq_lens.shape[0] * next_n
        _rows.check_decode_lengths(seq_lens, next_n, rows)
        out = np.full(rows + 5, -777, dtype=np.int32)[:rows]  # a view of a larger buffer
        steps = _rows.step_offsets(np, next_n)
        got = _rows.decode_lengths(np, seq_lens, next_n, width, steps, out)
        assert got is out
        want = reference_decode(table, next_n, width)
        assert out.tolist() == want, (seq_lens.shape, next_n, out.tolist()[:12], want[:12])
        assert min(want) == 0 and max(want) == width, "the cases reach both clips"
    return f"{len(cases)} decode layouts"


def test_decode_refusals(np, _rows):
    lens = np.array([5, 6, 7], dtype=np.int32)
    expect_value_error("next_n = 0", _rows.check_decode_lengths, lens, 0, 0)
    expect_value_error("num_rows = 5", _rows.check_decode_lengths, lens, 2, 5)
    expect_value_error("seq_lens: shape (3, 3)", _rows.check_decode_lengths,
                       np.zeros((3, 3), np.int32) + 9, 2, 6)
    expect_value_error("seq_lens: shape (2, 2, 2)", _rows.check_decode_lengths,
                       np.zeros((2, 2, 2), np.int32) + 9, 2, 4)


def test_prefill_windows(np, _rows):
    rng = random.Random(5)
    rows, width, stride = 300, 4096, 4104
    starts = [rng.randint(0, width) for _ in range(rows)]
    ends = [rng.randint(s - 3, width + 20) for s in starts]   # empty, short, past the end
    starts_np, ends_np = np.array(starts, np.int32), np.array(ends, np.int32)
    lengths = np.full(rows, -1, np.int32)
    offsets = np.full(rows, -1, np.int64)
    _rows.window_rows(np, starts_np, ends_np, stride, width, np.arange(rows, dtype=np.int64),
                      lengths, offsets)
    assert lengths.tolist() == [min(max(e - s, 0), width) for s, e in zip(starts, ends)]
    assert offsets.tolist() == [r * stride + s for r, s in enumerate(starts)]
    # int64 offsets: a row far into a large batch does not wrap at 2^31.
    big = np.zeros(1, np.int64)
    _rows.window_offsets(np, np.array([7], np.int32), 3_000_000_000, np.array([2], np.int64),
                         big)
    assert int(big[0]) == 6_000_000_007
    return f"{rows} windows"


def main():
    try:
        import numpy as np
    except ImportError:
        print("SKIP: no numpy (python3-numpy)")
        return SKIP
    from topk_client.compat import _rows
    for test in (test_decode_lengths, test_decode_refusals, test_prefill_windows):
        note = test(np, _rows)
        print(f"{test.__name__}: ok" + (f" ({note})" if note else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
