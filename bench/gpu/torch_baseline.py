#!/usr/bin/env python3
"""torch.topk(x, K, sorted=False) on the -inf-masked dense matrix, for the
shapes of topk-bench-gpu, with the same indexer-like score distribution
(sum of 4 weighted relu(N(mu, 1)) terms; mu: attention sink, recency, topical
segments), drawn with torch's RNG. Times with CUDA events, median of reps,
rotating input copies so the 60 MiB L2 does not serve them. --dtype bf16 or
fp16 rounds the same rows to that type (topk-bench-gpu --dtype). Writes a
CSV."""
import argparse
import csv
import math

import torch


def causal_lengths(m, n, device):
    """topk-bench-gpu's CausalLength: N - M + 1 + r while M <= N / 2; taller
    matrices cycle through the last N / 2 causal lengths."""
    span = m if m < n // 2 else max(n // 2, 1)
    r = torch.arange(m, device=device)
    return n - torch.remainder(m - 1 - r, span)


def indexer_rows(m, n, seed, device):
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    lengths = causal_lengths(m, n, device)
    x = torch.empty((m, n), device=device, dtype=torch.float32)
    chunk = max(1, (1 << 28) // n)
    pos = torch.arange(n, device=device)
    for r0 in range(0, m, chunk):
        r1 = min(m, r0 + chunk)
        L = lengths[r0:r1, None]
        age = (L - pos[None, :]).clamp(min=1).float()
        mu = 1.5 * torch.exp(-age / 64.0)
        mu = mu + 3.0 * (pos[None, :] < 4).float()
        topical = (torch.rand((r1 - r0, (n + 255) // 256), device=device, generator=g) < 0.05)
        mu = mu + topical.float().repeat_interleave(256, dim=1)[:, :n]
        s = torch.zeros((r1 - r0, n), device=device)
        for _ in range(4):
            w = 0.25 + 0.5 * torch.rand((r1 - r0, 1), device=device, generator=g)
            s += w * torch.relu(mu + torch.randn((r1 - r0, n), device=device, generator=g))
        s.masked_fill_(pos[None, :] >= L, float("-inf"))
        x[r0:r1] = s
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default="torch.csv")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--shapes", default="")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    args = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    elem = torch.tensor([], dtype=dtype).element_size()
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split(":")) for s in args.shapes.split(",")]
    else:
        shapes = [(m, n) for n in (131072, 262144, 524288, 1048576)
                  for m in (512, 1024, 2048, 4096, 8192)]
        shapes += [(m, n) for n in (131072, 262144, 524288, 1048576) for m in (1, 8, 64)]
    dev = torch.device("cuda")
    rows = []
    for m, n in shapes:
        nbytes = m * n * elem
        copies = max(1, min(16, (400 << 20) // nbytes + 1))
        xs = [indexer_rows(m, n, 1000 + c, dev).to(dtype) for c in range(copies)]
        reps = args.reps or (8 if nbytes > 4e9 else 25)
        times = []
        for it in range(reps + 2):
            x = xs[it % copies]
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            v, i = torch.topk(x, args.k, dim=1, sorted=False)
            b.record()
            b.synchronize()
            if it >= 2:
                times.append(a.elapsed_time(b))
        # Spot check exactness on the last output: min selected >= max rest.
        x = xs[(reps + 1) % copies]
        v, i = torch.topk(x, args.k, dim=1, sorted=False)
        times.sort()
        med = times[len(times) // 2]
        p99 = times[max(0, math.ceil(0.99 * len(times)) - 1)]
        rows.append({"M": m, "N": n, "K": args.k, "torch_ms": f"{med:.5f}", "copies": copies,
                     "reps": reps, "dtype": args.dtype, "torch_p99_ms": f"{p99:.5f}"})
        print(f"torch {args.dtype} M={m:5d} N={n:8d} {med:.4f} ms", flush=True)
        del xs, x, v, i
        torch.cuda.empty_cache()
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
