"""The engine drop-ins on a GPU (topk_client.compat.vllm / .sglang), against
torch.topk values (exactness.check: ties allowed, -1 past the length,
distinct in-range indices): vLLM's decode call with speculative rows
(next_n 1, 4, 8) and 1-D, (B, 1) and (B, next_n) lengths, 16,384 rows,
K = 3000, rows shorter than K and shorter than zero; its prefill call with
per-row windows (row starts, read in place); persistent_topk with 1-D and
2-D lengths; SGLang's fast_topk_v2 with and without row starts; BF16. The
logits outside each row's window are never masked: they hold the largest
values of all, so that reading one shows. The decode call is also replayed
in a CUDA graph and run under torch.compile(fullgraph=True). Exits 77
(skip) without torch or a CUDA device.

Usage: TOPK_LIBRARY=.../libtopk_c.so PYTHONPATH=client/python python3 compat_gpu_test.py
"""
import random
import sys

from gpu_suite import SKIP, run_cases, torch_with_gpu

TRAP = 1e30  # outside every window: a selector that reads there picks it


def logits_with_traps(torch, rows, width, starts, ends, dtype, device, generator, pitch=None):
    """(rows, width) logits with ties inside each [start, end) window and
    TRAP outside it, as a view at row pitch `pitch` of a larger buffer."""
    pitch = pitch or width
    pool = torch.full((rows, pitch), TRAP, dtype=dtype, device=device)
    view = pool[:, :width]
    values = ((torch.randn(rows, width, generator=generator) * 16).round() / 16).to(device)
    cols = torch.arange(width, device=device)
    inside = (cols[None, :] >= starts[:, None]) & (cols[None, :] < ends[:, None])
    view.copy_(torch.where(inside, values, torch.full_like(values, TRAP)).to(dtype))
    return view


def windows(torch, logits, starts):
    """Row r's scores from its start on (the frame exactness.check reads)."""
    width = logits.shape[1]
    cols = starts[:, None].long() + torch.arange(width, device=logits.device)[None, :]
    picked = torch.gather(logits, 1, cols.clamp(max=width - 1))
    return picked.masked_fill(cols >= width, float("-inf"))


def decode_case(torch, vllm, check, device, generator, batch, next_n, width, k, table,
                dtype=None):
    """One decode call; table 'seq' (B,), 'seq1' (B, 1) or 'per_row' (B, next_n)."""
    dtype = dtype or torch.float32
    rng = random.Random(batch * 1000 + next_n)
    seq = [rng.randint(0, width) for _ in range(batch)]
    seq[0] = min(width, next_n - 1)            # its first rows are shorter than zero
    if batch > 1:
        seq[1] = min(width, max(next_n, k // 3))  # shorter than k
    if table == "per_row":
        per_row = [[rng.randint(0, width) for _ in range(next_n)] for _ in range(batch)]
        expected = [v for row in per_row for v in row]
        seq_lens = torch.tensor(per_row, dtype=torch.int32, device=device)
    else:
        expected = [max(0, s - next_n + 1 + j) for s in seq for j in range(next_n)]
        shape = (batch, 1) if table == "seq1" else (batch,)
        seq_lens = torch.tensor(seq, dtype=torch.int32, device=device).reshape(shape)
    rows = batch * next_n
    lengths = torch.tensor(expected, dtype=torch.int32, device=device)
    logits = logits_with_traps(torch, rows, width, torch.zeros_like(lengths), lengths, dtype,
                               device, generator, pitch=width + 24)
    indices = torch.full((rows, k + 5), 777, dtype=torch.int32, device=device)
    vllm.top_k_per_row_decode(logits, next_n, seq_lens, indices, rows, logits.stride(0),
                              logits.stride(1), k)
    torch.cuda.synchronize()
    check(logits, lengths, k, indices)
    assert bool((indices[:, k:] == 777).all()), "wrote past k"
    return f"{rows} rows"


def test_vllm_decode(torch, vllm, check, device, generator):
    done = []
    for next_n in (1, 4, 8):
        for table in ("seq", "seq1", "per_row"):
            if table == "per_row" and next_n == 1:
                continue
            for k in (2048, 3000):
                done.append(decode_case(torch, vllm, check, device, generator, 9, next_n,
                                        20000, k, table))
    decode_case(torch, vllm, check, device, generator, 6, 4, 20000, 3000, "seq",
                torch.bfloat16)
    big = decode_case(torch, vllm, check, device, generator, 2048, 8, 8192, 2048, "seq")
    return f"{len(done)} layouts (next_n 1/4/8, 1-D/(B,1)/(B,next_n), K 2048/3000), " \
           f"BF16, {big}"


def test_vllm_prefill(torch, vllm, check, device, generator):
    rows, width = 300, 20000
    rng = random.Random(11)
    starts = [rng.randint(0, width) for _ in range(rows)]
    ends = [rng.randint(s, width) for s in starts]
    ends[0], ends[1], ends[2] = starts[0], starts[1] + 7, width   # empty, short, to the end
    starts_t = torch.tensor(starts, dtype=torch.int32, device=device)
    ends_t = torch.tensor(ends, dtype=torch.int32, device=device)
    logits = logits_with_traps(torch, rows, width, starts_t, ends_t, torch.float32, device,
                               generator, pitch=width + 8)
    for k in (2048, 3000):
        indices = torch.full((rows, k), 777, dtype=torch.int32, device=device)
        vllm.top_k_per_row_prefill(logits, starts_t, ends_t, indices, rows, logits.stride(0),
                                   logits.stride(1), k)
        torch.cuda.synchronize()
        check(windows(torch, logits, starts_t), ends_t - starts_t, k, indices)
    return f"{rows} windows, K 2048 and 3000, indices from each row's start"


def test_vllm_persistent(torch, vllm, check, device, generator):
    batch, next_n, width, k = 5, 4, 30000, 2048
    rng = random.Random(13)
    per_row = [[rng.randint(0, width) for _ in range(next_n)] for _ in range(batch)]
    per_row[0][0] = 100  # shorter than k
    rows = batch * next_n
    flat = torch.tensor([v for r in per_row for v in r], dtype=torch.int32, device=device)
    logits = logits_with_traps(torch, rows, width, torch.zeros_like(flat), flat, torch.float32,
                               device, generator)
    workspace = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    for lengths in (flat, flat.reshape(batch, next_n)):
        buffer = torch.full((rows, k + 64), 777, dtype=torch.int32, device=device)
        output = buffer[:, :k]
        vllm.persistent_topk(logits, lengths, output, workspace, k, int(flat.max()))
        torch.cuda.synchronize()
        check(logits, flat, k, output)
    return "1-D and (B, next_n) lengths, output a view of a wider buffer"


def test_sglang(torch, sglang, check, device, generator):
    rows, width, k = 64, 16384, 2048
    rng = random.Random(17)
    lengths_l = [rng.randint(0, width) for _ in range(rows)]
    lengths_l[0] = 5
    lengths = torch.tensor(lengths_l, dtype=torch.int32, device=device)
    zero = torch.zeros_like(lengths)
    logits = logits_with_traps(torch, rows, width, zero, lengths, torch.float32, device,
                               generator)
    got = sglang.fast_topk_v2(logits, lengths, k)
    torch.cuda.synchronize()
    assert got.shape == (rows, k) and got.dtype == torch.int32
    check(logits, lengths, k, got)
    starts_l = [rng.randint(0, width - v) for v in lengths_l]
    starts = torch.tensor(starts_l, dtype=torch.int32, device=device)
    logits = logits_with_traps(torch, rows, width, starts, starts + lengths, torch.float32,
                               device, generator)
    got = sglang.fast_topk_v2(logits, lengths, k, row_starts=starts)
    torch.cuda.synchronize()
    check(windows(torch, logits, starts), lengths, k, got)
    return "paged (no row starts) and ragged (row starts)"


def test_graph_and_compile(torch, vllm, check, device, generator):
    batch, next_n, width, k = 16, 2, 65536, 2048
    seq_lens = torch.randint(next_n, width, (batch,), generator=generator,
                             dtype=torch.int32).to(device)
    rows = batch * next_n
    logits = torch.empty((rows, width), device=device)
    indices = torch.empty((rows, k), dtype=torch.int32, device=device)

    def call():
        torch.ops.topk.vllm_top_k_per_row_decode(logits, next_n, seq_lens, indices, rows,
                                                 logits.stride(0), logits.stride(1), k)

    def expected_lengths():
        steps = torch.arange(1 - next_n, 1, device=device, dtype=torch.int32)
        return (seq_lens[:, None] + steps[None, :]).clamp(min=0).reshape(-1)

    logits.copy_((torch.randn(rows, width, generator=generator) * 8).round())
    call()  # plans and buffers before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for _ in range(20):
        logits.copy_((torch.randn(rows, width, generator=generator) * 8).round())
        seq_lens.copy_(torch.randint(0, width, (batch,), generator=generator,
                                     dtype=torch.int32))
        indices.fill_(12345)
        graph.replay()
        torch.cuda.synchronize()
        check(logits, expected_lengths(), k, indices)

    def step(scores, lens, out):
        vllm.top_k_per_row_decode(scores, next_n, lens, out, rows, scores.stride(0), 1, k)
        return out + 0

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    result = compiled(logits, seq_lens, indices)
    torch.cuda.synchronize()
    check(logits, expected_lengths(), k, result)
    return "decode: 20 graph replays exact; fullgraph compile exact"


def main():
    torch = torch_with_gpu()
    if torch is None:
        return SKIP
    from topk_client.compat import sglang, vllm
    from exactness import check
    device = torch.device("cuda", 0)
    generator = torch.Generator().manual_seed(131)
    return run_cases((
        ("vLLM decode", lambda: test_vllm_decode(torch, vllm, check, device, generator)),
        ("vLLM prefill", lambda: test_vllm_prefill(torch, vllm, check, device, generator)),
        ("vLLM persistent_topk", lambda: test_vllm_persistent(torch, vllm, check, device,
                                                              generator)),
        ("SGLang fast_topk_v2", lambda: test_sglang(torch, sglang, check, device, generator)),
        ("graph and compile", lambda: test_graph_and_compile(torch, vllm, check, device,
                                                             generator))))


if __name__ == "__main__":
    sys.exit(main())
