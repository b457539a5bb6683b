#!/usr/bin/env python3
"""What one eager Top-K call costs the host, per way of calling it (issue 31:
a call should cost what the kernel costs), and what the engine drop-ins
cost on the GPU against torch.topk on decode and prefill shapes.

Host time per call: the median over --reps of (time to enqueue --batch calls
back to back) / batch, the stream drained between batches and never inside
one, so that the figure is the host's own work and not a wait for the GPU.
Paths, on the same rows (FP32, every row full, K = --k):
  raw ctypes      topk_select_v2 through ctypes with every argument computed
                  beforehand (the floor: the C ABI call itself)
  inprocess       InProcessSelector.select(scores, lengths, k, out=out)
  torch_ops.select  topk_client.torch_ops.select(scores, lengths, k, out=out)
                  (the Python entry: the selector in eager mode, the op when compiled)
  op select_out   torch.ops.topk.select_out(scores, lengths, k, out=out)
  op select       torch.ops.topk.select(scores, lengths, k) (a new output)
  torch.topk      torch.topk(scores, k, sorted=False)
GPU time per call (CUDA events around --batch calls, median over reps; the
rows stay in L2 between calls at decode sizes, as when the indexer has just
written them). Every path's answer is checked for exactness before it is
timed (ours) or used as the reference (torch.topk).
The engines' shapes (--engine_shapes): vLLM's decode call (B sequences x
next_n speculative rows, 1-D lengths) and prefill call (row windows at
per-row starts) through topk_client.compat.vllm, against torch.topk after
masking each row's tail (what an engine without our kernel runs).

    TOPK_LIBRARY=.../libtopk_c.so PYTHONPATH=client/python:client/python/tests \\
        python3 bench/frontend/op_overhead_bench.py --csv=/tmp/overhead.csv
"""
import argparse
import csv
import statistics
import sys
import time

import torch


def host_us(call, batch, reps):
    """Median and p90 host microseconds per call (see the module docstring)."""
    per_call = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        for _ in range(batch):
            call()
        per_call.append((time.perf_counter_ns() - start) / batch / 1000)
    torch.cuda.synchronize()
    per_call.sort()
    return statistics.median(per_call), per_call[int(0.9 * (len(per_call) - 1))]


def gpu_us(call, batch, reps):
    """Median GPU microseconds per call, from CUDA events."""
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        begin.record()
        for _ in range(batch):
            call()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1000 / batch)
    return statistics.median(times)


def raw_call(selector, scores, lengths, out, k):
    """topk_select_v2 with its arguments fixed once: the floor."""
    from topk_client import inprocess
    m, n = scores.shape
    plan = selector.plan_for(scores.get_device(), k, m, n, inprocess._DTYPE_FP32)
    handle, workspace, workspace_bytes = plan.fixed
    args = (handle, scores.data_ptr(), scores.stride(0) if m > 1 else n, None,
            lengths.data_ptr(), m, n, out.data_ptr(), plan.row_status.data_ptr(), workspace,
            workspace_bytes, torch.cuda.current_stream().cuda_stream)
    function = selector._lib.topk_select_v2
    return lambda: function(*args)


def overhead_rows(args, check, selector):
    from topk_client import torch_ops
    rows = []
    for shape in args.shapes.split(","):
        m, n = (int(v) for v in shape.split("x"))
        k = min(args.k, n)
        scores = (torch.randn(m, n, device="cuda") * 64).round()
        lengths = torch.full((m,), n, dtype=torch.int32, device="cuda")
        outs = {name: torch.full((m, k), -7, dtype=torch.int32, device="cuda")
                for name in ("raw ctypes", "inprocess", "torch_ops.select", "op select_out")}
        new = {}
        paths = {
            "raw ctypes": raw_call(selector, scores, lengths, outs["raw ctypes"], k),
            "inprocess": lambda: selector.select(scores, lengths, k, out=outs["inprocess"]),
            "torch_ops.select": lambda: torch_ops.select(scores, lengths, k,
                                                         out=outs["torch_ops.select"]),
            "op select_out": lambda: torch.ops.topk.select_out(scores, lengths, k,
                                                               out=outs["op select_out"]),
            "op select": lambda: new.__setitem__("op select",
                                                 torch.ops.topk.select(scores, lengths, k)),
            "torch.topk": lambda: torch.topk(scores, k, dim=1, sorted=False),
        }
        for call in paths.values():
            call()  # plans, buffers, torch's own warm-up
        torch.cuda.synchronize()
        for name, out in list(outs.items()) + [("op select", new["op select"])]:
            check(scores, lengths, k, out)  # what is timed is exact
        floor = None
        for name, call in paths.items():
            host, host_p90 = host_us(call, args.batch, args.reps)
            floor = host if floor is None else floor
            gpu = gpu_us(call, args.batch, max(5, args.reps // 10))
            rows.append({"shape": f"{m}x{n}", "k": k, "path": name,
                         "host_us_p50": round(host, 2), "host_us_p90": round(host_p90, 2),
                         "host_over_raw_us": round(host - floor, 2), "gpu_us": round(gpu, 2)})
            print(f"{m}x{n} k={k} {name:16s} host {host:7.2f} us (p90 {host_p90:7.2f}, "
                  f"+{host - floor:5.2f} over raw)  gpu {gpu:8.2f} us", flush=True)
    return rows


def masked_topk(scores, lengths, k):
    cols = torch.arange(scores.shape[1], device=scores.device)
    masked = scores.masked_fill(cols[None, :] >= lengths[:, None], float("-inf"))
    return torch.topk(masked, k, dim=1, sorted=False)


def engine_rows(args, check):
    from topk_client.compat import vllm
    rows = []
    k = args.k
    for shape in args.engine_shapes.split(","):
        kind, spec = shape.split(":")
        if kind == "decode":
            batch, next_n, width = (int(v) for v in spec.split("x"))
            m = batch * next_n
            seq = torch.randint(width // 2, width + 1, (batch,), dtype=torch.int32, device="cuda")
            logits = (torch.randn(m, width, device="cuda") * 64).round()
            out = torch.empty((m, k), dtype=torch.int32, device="cuda")
            steps = torch.arange(1 - next_n, 1, dtype=torch.int32, device="cuda")
            lengths = (seq[:, None] + steps[None, :]).clamp(min=0).reshape(-1)
            ours = lambda: vllm.top_k_per_row_decode(logits, next_n, seq, out, m,  # noqa: E731
                                                     logits.stride(0), 1, k)
            frame, starts = logits, None
        else:
            m, width, window = (int(v) for v in spec.split("x"))
            starts = torch.randint(0, width - window + 1, (m,), dtype=torch.int32, device="cuda")
            ends = starts + window
            logits = (torch.randn(m, width, device="cuda") * 64).round()
            out = torch.empty((m, k), dtype=torch.int32, device="cuda")
            lengths = ends - starts
            ours = lambda: vllm.top_k_per_row_prefill(logits, starts, ends, out, m,  # noqa: E731
                                                      logits.stride(0), 1, k)
            cols = starts[:, None].long() + torch.arange(width, device="cuda")[None, :]
            frame = torch.gather(logits, 1, cols.clamp(max=width - 1)).masked_fill(
                cols >= width, float("-inf"))
        ours()
        torch.cuda.synchronize()
        check(frame, lengths, k, out)
        if starts is None:
            theirs = lambda: masked_topk(logits, lengths, k)  # noqa: E731
        else:
            cols = torch.arange(width, device="cuda")[None, :]
            inside = (cols >= starts[:, None]) & (cols < (starts + lengths)[:, None])
            theirs = lambda: torch.topk(logits.masked_fill(~inside, float("-inf")),  # noqa: E731
                                        k, dim=1, sorted=False)
        for name, call in (("topk_client.compat.vllm", ours), ("torch.topk (masked)", theirs)):
            gpu = gpu_us(call, 10, 10)
            host, _ = host_us(call, 10, 20)
            rows.append({"shape": f"{kind} {spec}", "k": k, "path": name, "host_us_p50":
                         round(host, 2), "host_us_p90": "", "host_over_raw_us": "",
                         "gpu_us": round(gpu, 2)})
            print(f"{kind} {spec} k={k} {name:24s} gpu {gpu:9.2f} us  host {host:7.2f} us",
                  flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="1x4096,64x131072")
    parser.add_argument("--engine_shapes",
                        default="decode:32x2x131072,decode:64x1x65536,prefill:4096x32768x16384")
    parser.add_argument("--k", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--csv", default="")
    args = parser.parse_args()
    import topk_client.torch_ops  # noqa: F401 (torch.ops.topk)
    from exactness import check
    from topk_client.torch_ops import default_selector
    torch.manual_seed(31)
    rows = overhead_rows(args, check, default_selector())
    if args.engine_shapes:
        rows += engine_rows(args, check)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
