"""InProcessSelector on a GPU: exactness against torch.topk on ragged rows
with ties (FP32 and BF16, K 512 and 2048), out= in place at a wider row
stride, values, NaN rows (row status, check=True), a torch CUDA graph
captured once and replayed 100 times on new rows, each replay exact, and
close() (a select after it plans again).
Exits 77 (skip) without torch or a CUDA device; a missing libtopk_c.so
with both present is a failure.

Usage: TOPK_LIBRARY=build/kernels/src/cuda/libtopk_c.so \\
       PYTHONPATH=build/python python3 inprocess_gpu_test.py
"""
import sys

from gpu_suite import SKIP, torch_with_gpu


def ragged(m, n, k, device, generator):
    import torch
    lengths = torch.randint(0, n + 1, (m,), generator=generator, dtype=torch.int32)
    lengths[0], lengths[1], lengths[2] = 0, n, k // 3  # empty, full, shorter than k
    return lengths.to(device)


def rows(m, n, pitch, dtype, device, generator):
    """(m, n) with ties, at row pitch `pitch` inside a larger allocation."""
    import torch
    pool = torch.empty(m * pitch + 64, dtype=dtype, device=device)
    view = pool[64:].view(m, pitch)[:, :n]
    values = (torch.randn(m, n, generator=generator) * 16).round() / 16
    view.copy_(values.to(device=device, dtype=dtype))
    return view


def main():
    torch = torch_with_gpu()
    if torch is None:
        return SKIP
    from topk_client import InProcessSelector, RegionError
    global check
    from exactness import check  # needs torch: imported once it is known to be there

    topk = InProcessSelector()
    device = torch.device("cuda", 0)
    generator = torch.Generator().manual_seed(7)
    m, n = 24, 65536
    for dtype in (torch.float32, torch.bfloat16):
        for k in (512, 2048):
            scores = rows(m, n, n + 40, dtype, device, generator)
            lengths = ragged(m, n, k, device, generator)
            indices = topk.select(scores, lengths, k)
            torch.cuda.synchronize()
            check(scores, lengths, k, indices)
            # In place at a wider stride, with values; the columns past k untouched.
            out = torch.full((m, k + 8), 777, dtype=torch.int32, device=device)
            values = torch.empty((m, k + 8), dtype=dtype, device=device)
            assert topk.select(scores, lengths, k, out=out, values=values, sorted=True) is out
            torch.cuda.synchronize()
            check(scores, lengths, k, out, values)
            assert bool((out[:, k:] == 777).all()), "wrote past k"
            print(f"{dtype} k={k}: exact ({m} ragged rows of up to {n})")

    # A NaN in a valid prefix: that row is -1, its status 1, check=True names it.
    k = 512
    scores = rows(m, n, n, torch.float32, device, generator)
    lengths = ragged(m, n, k, device, generator)
    lengths[5] = n
    scores[5, 17] = float("nan")
    status = torch.empty(m, dtype=torch.uint8, device=device)
    out = topk.select(scores, lengths, k, row_status=status)
    torch.cuda.synchronize()
    assert int(status[5]) == 1 and bool((out[5] == -1).all()), "NaN row"
    assert int(status.sum()) == 1, "only the NaN row fails"
    try:
        topk.select(scores, lengths, k, check=True)
        raise AssertionError("check=True did not raise on a NaN row")
    except ValueError as e:
        assert "row 5 (NaN" in str(e), e
    # The ZeroCopyClient's argument checks, the same messages.
    try:
        topk.select(scores.cpu(), lengths, k)
        raise AssertionError("a host tensor was accepted")
    except RegionError as e:
        assert "CUDA tensor" in str(e), e

    # A CUDA graph: warm up once (plans and buffers made outside the
    # capture), capture, replay on new rows written into the same tensors.
    k = 2048
    static_scores = rows(16, 131072, 131072, torch.float32, device, generator)
    static_lengths = ragged(16, 131072, k, device, generator)
    static_out = torch.empty((16, k), dtype=torch.int32, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        topk.select(static_scores, static_lengths, k, out=static_out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        topk.select(static_scores, static_lengths, k, out=static_out)
    for replay in range(100):
        static_scores.copy_(rows(16, 131072, 131072, torch.float32, device, generator))
        static_lengths.copy_(ragged(16, 131072, k, device, generator))
        static_out.fill_(12345)
        graph.replay()
        torch.cuda.synchronize()
        check(static_scores, static_lengths, k, static_out)
    print("CUDA graph: 100 replays exact")
    # close() frees the plans; the next select plans again.
    topk.close()
    again = topk.select(static_scores, static_lengths, k)
    torch.cuda.synchronize()
    check(static_scores, static_lengths, k, again)
    print("in-process selector on the GPU: exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
