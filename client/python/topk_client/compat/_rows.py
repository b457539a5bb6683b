"""Where each row of an engine's indexer logits starts and how long it is,
as the engines define them, written for any array module `xp` that has
numpy's ufunc spelling with out= (numpy, torch): the arithmetic runs on the
GPU in the drop-ins and is checked against plain Python on numpy arrays
where there is no GPU. Every result goes into a buffer the caller owns, so
that a call allocates nothing (and can be captured in a CUDA graph).

Lengths are clipped to [0, width]: a row can be shorter than zero (a
speculative row before its sequence starts) and a length past the logits'
width could not be read.
"""


def check_decode_lengths(seq_lens, next_n: int, num_rows: int) -> None:
    """The shapes the decode call takes: seq_lens (B,) or (B, 1) with one
    length per sequence, whose next_n speculative rows end one position
    apart, or (B, next_n) with each row's own length; B * next_n rows."""
    if not isinstance(next_n, int) or next_n < 1:
        raise ValueError(f"next_n = {next_n}: must be a positive int")
    per_row = seq_lens.ndim == 2 and seq_lens.shape[1] == next_n and next_n > 1
    if seq_lens.ndim not in (1, 2) or (seq_lens.ndim == 2 and not per_row and
                                       seq_lens.shape[1] != 1):
        raise ValueError(f"seq_lens: shape {tuple(seq_lens.shape)}: (B,), (B, 1) or "
                         f"(B, next_n = {next_n})")
    rows = seq_lens.shape[0] * next_n
    if rows != num_rows:
        raise ValueError(f"seq_lens: {seq_lens.shape[0]} sequences x next_n = {next_n} is "
                         f"{rows} rows, num_rows = {num_rows}")


def step_offsets(xp, next_n: int, **where):
    """(next_n,) int32: how far row j of a sequence's speculative rows ends
    before the sequence's last position (1 - next_n .. 0)."""
    return xp.arange(1 - next_n, 1, dtype=xp.int32, **where)


def decode_lengths(xp, seq_lens, next_n: int, width: int, steps, out):
    """out[i] = row i's length: seq_lens[i // next_n] - next_n + 1 + i % next_n
    for one length per sequence (steps = step_offsets(next_n)), or
    seq_lens[i // next_n, i % next_n] for one per row; clipped to [0, width]."""
    if seq_lens.ndim == 2 and seq_lens.shape[1] == next_n and next_n > 1:
        xp.clip(seq_lens.reshape(-1), 0, width, out=out)
        return out
    sequences = seq_lens.shape[0]
    xp.add(seq_lens.reshape(sequences, 1), steps.reshape(1, next_n),
           out=out.reshape(sequences, next_n))
    xp.clip(out, 0, width, out=out)
    return out


def window_rows(xp, row_starts, row_ends, row_stride: int, width: int, row_index, lengths,
                offsets):
    """Row i is the window [row_starts[i], row_ends[i]) of the logits' row i:
    lengths[i] = row_ends[i] - row_starts[i] clipped to [0, width], and
    offsets[i] = i * row_stride + row_starts[i] elements from the logits'
    first element (the C ABI's packed layout; row_index is 0 .. M-1 int64)."""
    xp.subtract(row_ends, row_starts, out=lengths)
    xp.clip(lengths, 0, width, out=lengths)
    return window_offsets(xp, row_starts, row_stride, row_index, offsets)


def window_offsets(xp, row_starts, row_stride: int, row_index, offsets):
    """offsets[i] = i * row_stride + row_starts[i] (int64 elements)."""
    xp.multiply(row_index, row_stride, out=offsets)
    xp.add(offsets, row_starts, out=offsets)
    return offsets
