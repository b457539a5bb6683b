"""torch.ops.topk.select / select_out on a GPU, in the three ways an engine
runs a step: eager (FP32, BF16, FP16 scores with ties, ragged lengths on
the device, K 512 and 2048, out= at a wider row stride), inside a captured
CUDA graph (indexer -> select -> gather, replayed 100 times on new rows,
each replay exact) and under torch.compile(fullgraph=True) (the same step:
no graph break, exact); and the argument errors, the same type and message
as InProcessSelector.select's. Exits 77 (skip) without torch or a CUDA
device.

Usage: TOPK_LIBRARY=.../libtopk_c.so PYTHONPATH=client/python python3 torch_ops_gpu_test.py
"""
import sys

from gpu_suite import SKIP, run_cases, torch_with_gpu


def indexer_step(torch, query, keys, lengths, k):
    """An indexer's scores, the top-k of each row, the keys they pick."""
    scores = query @ keys.T
    indices = torch.ops.topk.select(scores, lengths, k)
    picked = torch.gather(scores, 1, indices.clamp(min=0).long())
    return scores, indices, picked


def test_eager(torch, check, rows, ragged, device, generator):
    from topk_client import torch_ops
    m, n = 24, 65536
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for k in (512, 2048):
            scores = rows(m, n, n + 40, dtype, device, generator)
            lengths = ragged(m, n, k, device, generator)
            indices = torch.ops.topk.select(scores, lengths, k)
            torch.cuda.synchronize()
            assert indices.shape == (m, k) and indices.dtype == torch.int32
            check(scores, lengths, k, indices)
            entry = torch.full((m, k), 777, dtype=torch.int32, device=device)
            assert torch_ops.select(scores, lengths, k, out=entry) is entry  # no dispatcher
            torch.cuda.synchronize()
            check(scores, lengths, k, entry)
            out = torch.full((m, k + 8), 777, dtype=torch.int32, device=device)
            assert torch.ops.topk.select_out(scores, lengths, k, out=out, sorted=True) is None
            torch.cuda.synchronize()
            check(scores, lengths, k, out)
            assert bool((out[:, k:] == 777).all()), "wrote past k"
            ordered = torch.gather(scores, 1, out[:, :k].clamp(min=0).long()).float()
            live = out[:, :k] >= 0
            assert bool(((ordered[:, 1:] <= ordered[:, :-1]) | ~live[:, 1:]).all()), "sorted"
    return "FP32, BF16, FP16 x K 512, 2048: exact; select_out in place, sorted"


def test_argument_errors(torch, device):
    from topk_client import InProcessSelector
    selector = InProcessSelector()
    scores = torch.randn(4, 1000, device=device)
    lengths = torch.full((4,), 1000, dtype=torch.int32, device=device)
    cases = [("host scores", (scores.cpu(), lengths, 8)),
             ("1-D scores", (scores[0], lengths, 8)),
             ("float64 scores", (scores.double(), lengths, 8)),
             ("int64 lengths", (scores, lengths.long(), 8)),
             ("host lengths", (scores, lengths.cpu(), 8)),
             ("3 lengths", (scores, lengths[:3], 8)),
             ("k = 0", (scores, lengths, 0))]
    for name, args in cases:
        errors = []
        for call in (selector.select, torch.ops.topk.select):
            try:
                call(*args)
                errors.append(None)
            except Exception as e:  # noqa: BLE001 - the type is what is compared
                errors.append(e)
        direct, op = errors
        assert direct is not None, f"{name}: InProcessSelector accepted it"
        assert type(op) is type(direct) and str(direct) in str(op), \
            f"{name}: the op raised {type(op).__name__}({op}), the selector " \
            f"{type(direct).__name__}({direct})"
    return f"{len(cases)} refusals: the selector's type and message"


def test_cuda_graph(torch, check, ragged, device, generator):
    m, n, k, head = 16, 131072, 2048, 64
    query = torch.empty((m, head), device=device)
    keys = torch.empty((n, head), device=device)
    lengths = torch.empty(m, dtype=torch.int32, device=device)

    def refill():
        query.copy_(torch.randn(m, head, generator=generator).round())
        keys.copy_((torch.randn(n, head, generator=generator) * 4).round() / 4)
        lengths.copy_(ragged(m, n, k, device, generator))

    refill()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        indexer_step(torch, query, keys, lengths, k)   # plans and buffers, outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        scores, indices, picked = indexer_step(torch, query, keys, lengths, k)
    for _ in range(100):
        refill()
        indices.fill_(12345)
        graph.replay()
        torch.cuda.synchronize()
        check(scores, lengths, k, indices)
        want = torch.gather(scores, 1, indices.clamp(min=0).long())
        assert torch.equal(picked, want), "the gather after the select"
    return "indexer -> select -> gather: 100 replays exact"


def test_compile(torch, check, ragged, device, generator):
    import torch._dynamo
    m, n, k, head = 8, 32768, 2048, 64
    breaks = []

    def count_breaks(gm, inputs):
        breaks.append(gm)
        return gm.forward

    for backend in ("inductor", count_breaks):
        torch._dynamo.reset()
        step = lambda q, kv, lens: indexer_step(torch, q, kv, lens, k)  # noqa: E731
        compiled = torch.compile(step, fullgraph=True, backend=backend)
        for _ in range(3):
            query = torch.randn(m, head, generator=generator).round().to(device)
            keys = ((torch.randn(n, head, generator=generator) * 4).round() / 4).to(device)
            lengths = ragged(m, n, k, device, generator)
            scores, indices, picked = compiled(query, keys, lengths)
            torch.cuda.synchronize()
            check(scores, lengths, k, indices)
            assert torch.equal(picked, torch.gather(scores, 1, indices.clamp(min=0).long()))
    assert len(breaks) == 1, f"{len(breaks)} graphs for one function: a break or a recompile"
    # The Python entry (the selector in eager mode) is the operator when traced.
    from topk_client.torch_ops import select
    torch._dynamo.reset()
    compiled = torch.compile(lambda s, lens: select(s, lens, k), fullgraph=True,
                             backend=count_breaks)
    scores = (torch.randn(m, n, generator=generator) * 8).round().to(device)
    lengths = ragged(m, n, k, device, generator)
    indices = compiled(scores, lengths)
    torch.cuda.synchronize()
    check(scores, lengths, k, indices)
    assert len(breaks) == 2 and "topk.select" in str(breaks[-1].graph), breaks[-1].graph

    def in_place(scores, lens, out):
        torch.ops.topk.select_out(scores, lens, k, out=out)
        return out[:, :k] + 0

    compiled = torch.compile(in_place, fullgraph=True, backend="aot_eager")
    scores = (torch.randn(m, n, generator=generator) * 8).round().to(device)
    lengths = ragged(m, n, k, device, generator)
    out = torch.full((m, k), -5, dtype=torch.int32, device=device)
    copy = compiled(scores, lengths, out)
    torch.cuda.synchronize()
    check(scores, lengths, k, out)
    assert torch.equal(copy, out), "select_out's write seen after it"
    return "fullgraph: inductor and a counting backend (1 graph), select_out functionalised"


def main():
    torch = torch_with_gpu()
    if torch is None:
        return SKIP
    import topk_client.torch_ops  # noqa: F401 (registers torch.ops.topk)
    from exactness import check
    from inprocess_gpu_test import ragged, rows
    device = torch.device("cuda", 0)
    generator = torch.Generator().manual_seed(31)
    return run_cases((
        ("eager", lambda: test_eager(torch, check, rows, ragged, device, generator)),
        ("argument errors", lambda: test_argument_errors(torch, device)),
        ("CUDA graph", lambda: test_cuda_graph(torch, check, ragged, device, generator)),
        ("torch.compile", lambda: test_compile(torch, check, ragged, device, generator))))


if __name__ == "__main__":
    sys.exit(main())
