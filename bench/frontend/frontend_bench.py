#!/usr/bin/env python3
"""Frontend benchmark: what a Top-K stage costs inside a sparse-attention
step, per way of calling it (README.md beside this file).

A step, on one CUDA stream:
  producer  an indexer-like BF16 matmul of a (M, 128) query block (one of 4,
            picked on the device each step) with a (N, 128) key block into
            float32 scores (M, N); causal ragged lengths
            L_r = max(1, N - (M - 1 - r) * stride);
  top-k     the provider's selection of K indices per row;
  consumer  a gather of the selected keys: rows of a (N, 64) BF16 value
            block (index_select), or of the scores when that would exceed
            --consumer_mib.
Providers, interleaved round-robin in blocks of steps:
  none        the step without top-k (the consumer reads fixed indices): subtracted
  torch.topk  masked_fill(-inf) past each length + torch.topk(sorted=False)
  inprocess   topk_client.inprocess.InProcessSelector, else libtopk_c.so by ctypes
  channel     ZeroCopyClient(target).channel(...).select (stream memory operations)
  rpc         ZeroCopyClient(target).select (CUDA IPC, a SelectPipeline request)
Each step is timed with CUDA events around all three stages; --graph also
captures whole steps (not rpc) in a CUDA graph and replays them. Every
warm-up step and the last step of every timed block is checked for
exactness. Writes --csv (mps, shape, k, provider, mode, steps, step_p50_us,
step_p99_us, topk_stage_us, exact) and prints a table.
"""
import argparse
import csv
import ctypes
import math
import os
import sys
import time

import torch

DEFAULT_SHAPES = "8x131072,64x131072,2048x65536"
PROVIDERS = ("none", "torch.topk", "inprocess", "channel", "rpc")
HEAD = 128     # query / key dimension of the indexer
VALUE_DIM = 64  # the consumer's value block


# --- the step's producer and consumer -------------------------------------------------

def fp32_matmul():
    """q (M, 128) bf16 @ keys.T -> float32 scores written into `out`: cuBLAS
    with float32 output where torch offers it (mm(out_dtype=)), else the bf16
    inputs widened (exactly) and multiplied in FP32. A bf16 result would
    round the scores to 8 bits, ties by the hundred per row, which no
    indexer gives. Returns (description, fn(q, keys_t, keys_t32, out))."""
    a = torch.ones((2, HEAD), dtype=torch.bfloat16, device="cuda")
    probe = torch.empty((2, 2), device="cuda")
    try:
        torch.mm(a, a.t(), out_dtype=torch.float32, out=probe)
        return "bf16 mm, fp32 out", lambda q, kt, kt32, out: torch.mm(
            q, kt, out_dtype=torch.float32, out=out)
    except (TypeError, RuntimeError):
        pass
    try:
        torch.mm(a, a.t(), out_dtype=torch.float32)
        return "bf16 mm, fp32 out (copied)", lambda q, kt, kt32, out: out.copy_(
            torch.mm(q, kt, out_dtype=torch.float32))
    except (TypeError, RuntimeError):
        return "bf16 values, fp32 mm", lambda q, kt, kt32, out: torch.mm(q.float(), kt32, out=out)


class Workload:
    """One shape's static buffers (every provider reads and writes the same
    ones, so channels and graphs see fixed addresses) and the producer and
    consumer stages."""

    BANKS = 4

    def __init__(self, m, n, k, device, causal_stride, consumer_mib, matmul, seed=1):
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        self.m, self.n, self.k = m, n, k
        self.q_bank = torch.randn((self.BANKS, m, HEAD), generator=g, device=device).to(
            torch.bfloat16)
        keys = torch.randn((n, HEAD), generator=g, device=device).to(torch.bfloat16)
        self.keys_t = keys.t()
        self.keys_t32 = keys.float().t().contiguous()
        self.values = torch.randn((n, VALUE_DIM), generator=g, device=device).to(torch.bfloat16)
        self.slot = torch.zeros(1, dtype=torch.int64, device=device)
        self.scores = torch.empty((m, n), device=device)
        rows = torch.arange(m, device=device)
        self.lengths = (n - (m - 1 - rows) * causal_stride).clamp(min=1).to(torch.int32)
        self.positions = torch.arange(n, device=device)
        self.matmul = matmul
        # The consumer reads values when that stays small, else the scores.
        self.consume_values = m * k * VALUE_DIM * 2 <= consumer_mib << 20
        if self.consume_values:
            self.consumed = torch.empty((m * k, VALUE_DIM), dtype=torch.bfloat16, device=device)
        else:
            self.consumed = torch.empty((m, k), device=device)
        # `none`: fixed valid indices (spread over each row's prefix).
        span = self.lengths.to(torch.int64)[:, None]
        self.fixed = (torch.arange(k, device=device)[None, :] * 7919 % span).to(torch.int32)

    def produce(self):
        # The query block changes every step, chosen on the device (so a
        # graph replay changes it too).
        self.slot.add_(1).remainder_(self.BANKS)
        q = self.q_bank.index_select(0, self.slot).view(self.m, HEAD)
        self.matmul(q, self.keys_t, self.keys_t32, self.scores)

    def consume(self, indices):
        picked = indices.clamp(min=0).long()
        if self.consume_values:
            torch.index_select(self.values, 0, picked.view(-1), out=self.consumed)
        else:
            torch.gather(self.scores, 1, picked, out=self.consumed)


def exact(scores, lengths, k, indices) -> bool:
    """Set-valued exactness with ties, all rows on the GPU: min(k, L) distinct
    in-range indices then -1, whose scores are the row's min(k, L) largest
    (as a multiset)."""
    m, n = scores.shape
    length = lengths.to(torch.int64)
    want = length.clamp(max=k)
    cols = torch.arange(k, device=scores.device)
    live = cols[None, :] < want[:, None]
    got = indices[:, :k].to(torch.int64)
    ok = bool(((got == -1) | live).all()) and bool(((~live) | ((got >= 0) & (got < length[:, None]))).all())
    if not ok:
        return False
    ordered = torch.where(live, got, n + cols[None, :]).sort(dim=1).values
    if bool((ordered[:, 1:] == ordered[:, :-1]).any()):
        return False
    kk = min(k, n)
    masked = scores.masked_fill(torch.arange(n, device=scores.device)[None, :] >= length[:, None],
                                float("-inf"))
    best = torch.topk(masked, kk, dim=1).values
    picked = torch.gather(scores, 1, got[:, :kk].clamp(min=0))
    neg = torch.full((), float("-inf"), device=scores.device)
    picked = torch.where(live[:, :kk], picked, neg).sort(dim=1, descending=True).values
    return bool((picked == torch.where(live[:, :kk], best, neg)).all())


# --- providers ---------------------------------------------------------------------------

class NoTopK:
    name, capturable = "none", True

    def stage(self, w):
        return w.fixed

    def close(self):
        pass


class TorchTopK:
    name, capturable = "torch.topk", True

    def stage(self, w):
        # torch.topk has no lengths: mask past each row's length first (in
        # place: the producer rewrites the scores every step).
        w.scores.masked_fill_(w.positions[None, :] >= w.lengths[:, None], float("-inf"))
        return torch.topk(w.scores, w.k, dim=1, sorted=False).indices

    def close(self):
        pass


class LibTopK:
    """libtopk_c.so's C ABI (kernels/include/topk/topk_c.h): a pitched FP32
    plan for the shape, its workspace, topk_select_v2 on the current stream."""

    name, capturable = "inprocess", True

    def __init__(self, path, w, device):
        lib = ctypes.CDLL(path)
        lib.topk_plan_create_v2.argtypes = [ctypes.c_int, ctypes.c_int32, ctypes.c_int64,
                                            ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                                            ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)]
        lib.topk_plan_workspace_bytes.argtypes = [ctypes.c_void_p]
        lib.topk_plan_workspace_bytes.restype = ctypes.c_size_t
        lib.topk_plan_destroy.argtypes = [ctypes.c_void_p]
        lib.topk_last_error.restype = ctypes.c_char_p
        lib.topk_select_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self.lib = lib
        self.plan = ctypes.c_void_p()
        pitched, fp32 = 0, 0
        self._ok(lib.topk_plan_create_v2(device.index or 0, w.k, w.m, w.n, pitched, fp32, 0,
                                         ctypes.byref(self.plan)), "topk_plan_create_v2")
        size = lib.topk_plan_workspace_bytes(self.plan)
        self.workspace = torch.empty(max(size, 1), dtype=torch.uint8, device=device)
        self.out = torch.empty((w.m, w.k), dtype=torch.int32, device=device)
        self.device = device

    def _ok(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: {rc} {self.lib.topk_last_error().decode()}")

    def stage(self, w):
        stream = torch.cuda.current_stream(self.device).cuda_stream
        self._ok(self.lib.topk_select_v2(
            self.plan, w.scores.data_ptr(), w.scores.stride(0), None, w.lengths.data_ptr(), w.m,
            w.n, self.out.data_ptr(), None, self.workspace.data_ptr(), self.workspace.numel(),
            stream), "topk_select_v2")
        return self.out

    def close(self):
        if self.plan:
            self.lib.topk_plan_destroy(self.plan)
            self.plan = ctypes.c_void_p()


class InProcess:
    """topk_client.inprocess.InProcessSelector (when this package has it)."""

    name, capturable = "inprocess", True

    def __init__(self, selector_class, w, device):
        self.selector = selector_class()
        self.out = torch.empty((w.m, w.k), dtype=torch.int32, device=device)

    def stage(self, w):
        self.selector.select(w.scores, w.lengths, w.k, out=self.out)
        return self.out

    def close(self):
        close = getattr(self.selector, "close", None)
        if close is not None:
            close()


class ChannelTopK:
    name, capturable = "channel", True

    def __init__(self, zc, w, device):
        self.channel = zc.channel(w.k, w.m, w.n)
        self.out = torch.empty((w.m, w.k), dtype=torch.int32, device=device)

    def stage(self, w):
        return self.channel.select(w.scores, w.lengths, out=self.out)

    def close(self):
        self.channel.close()


class RpcTopK:
    name, capturable = "rpc", False

    def __init__(self, zc, w, device):
        self.zc = zc
        self.out = torch.empty((w.m, w.k), dtype=torch.int32, device=device)

    def stage(self, w):
        return self.zc.select(w.scores, w.lengths, w.k, out=self.out)

    def close(self):
        pass


def make_inprocess(args, w, device):
    try:
        from topk_client.inprocess import InProcessSelector
    except ImportError:
        InProcessSelector = None
    have_lib = bool(args.libtopk) and os.path.exists(args.libtopk)
    if InProcessSelector is not None:
        try:
            return InProcess(InProcessSelector, w, device)
        except Exception as e:  # its API may still be moving: fall back to the C ABI
            if not have_lib:
                raise
            print(f"   InProcessSelector unusable ({e}); libtopk_c.so by ctypes instead")
    if not have_lib:
        raise RuntimeError(f"no topk_client.inprocess and no libtopk_c.so at {args.libtopk!r}")
    return LibTopK(args.libtopk, w, device)


# --- runners: one provider in one mode --------------------------------------------------

class Runner:
    """A provider's step, eager or as a replayed CUDA graph; times blocks
    of steps with CUDA events and checks answers."""

    def __init__(self, provider, w, mode, device):
        self.provider, self.w, self.mode, self.device = provider, w, mode, device
        self.times_us = []
        self.checked = 0
        self.inexact = 0
        self.graph = None
        self.answer = None

    def step(self):
        self.w.produce()
        indices = self.provider.stage(self.w)
        self.w.consume(indices)
        return indices

    def prepare(self, warmup):
        """Warm-up steps, each checked; in graph mode then the capture (after
        a warm-up on a side stream, as torch.cuda.graph asks)."""
        for _ in range(warmup):
            self.answer = self.step()
            self.check()
        if self.mode == "graph":
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.step()
            torch.cuda.current_stream(self.device).wait_stream(side)
            torch.cuda.synchronize(self.device)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.answer = self.step()
            for _ in range(max(2, warmup // 2)):
                self.graph.replay()
                self.check()

    def run_once(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            self.answer = self.step()

    def block(self, steps):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(steps)]
        for start, end in events:
            start.record()
            self.run_once()
            end.record()
        events[-1][1].synchronize()
        self.times_us += [1000.0 * s.elapsed_time(e) for s, e in events]
        self.check()  # the block's last step

    def check(self):
        if self.provider.name == "none":
            return
        torch.cuda.synchronize(self.device)
        self.checked += 1
        if not exact(self.w.scores, self.w.lengths, self.w.k, self.answer):
            self.inexact += 1

    def close(self):
        self.graph = None  # before the provider (a channel's block is in the graph)


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


# --- one shape --------------------------------------------------------------------------

def bench_shape(args, zc, m, n, k, device, matmul):
    w = Workload(m, n, k, device, args.causal_stride, args.consumer_mib, matmul)
    providers, skipped = [], {}
    for name in args.providers:
        try:
            if name == "none":
                providers.append(NoTopK())
            elif name == "torch.topk":
                providers.append(TorchTopK())
            elif name == "inprocess":
                providers.append(make_inprocess(args, w, device))
            elif zc is None:
                raise RuntimeError("no server (--target)")
            elif name == "channel":
                providers.append(ChannelTopK(zc, w, device))
            elif name == "rpc":
                providers.append(RpcTopK(zc, w, device))
        except Exception as e:  # a provider this machine cannot run: reported, not fatal
            skipped[name] = str(e).splitlines()[0][:160]
    modes = ["eager"] + (["graph"] if args.graph else [])
    runners = []
    for mode in modes:
        for p in providers:
            if mode == "graph" and not p.capturable:
                continue
            r = Runner(p, w, mode, device)
            try:
                r.prepare(args.warmup)
                runners.append(r)
            except Exception as e:
                skipped[f"{p.name}/{mode}"] = str(e).splitlines()[0][:160]
                torch.cuda.synchronize(device)
    # Round-robin blocks: every runner sees the same thermal and clock state.
    blocks = max(1, args.steps // args.block)
    for _ in range(blocks):
        for r in runners:
            r.block(args.block)
    rows = summarize(args, runners, m, n, k)
    for r in runners:
        r.close()
    for p in providers:
        p.close()
    for name, why in skipped.items():
        print(f"   {m}x{n} k={k}: {name} skipped: {why}")
    return rows


def summarize(args, runners, m, n, k):
    base = {}
    stats = []
    for r in runners:
        t = sorted(r.times_us)
        p50, p99 = percentile(t, 0.5), percentile(t, 0.99)
        stats.append((r, p50, p99))
        if r.provider.name == "none":
            base[r.mode] = p50
    rows = []
    for r, p50, p99 in stats:
        none = base.get(r.mode)
        stage = "" if r.provider.name == "none" or none is None else f"{p50 - none:.1f}"
        if r.provider.name == "none":
            verdict = "n/a"
        else:
            verdict = "yes" if r.inexact == 0 and r.checked > 0 else f"NO ({r.inexact}/{r.checked})"
        rows.append({"mps": args.mps, "shape": f"{m}x{n}", "k": k, "provider": r.provider.name,
                     "mode": r.mode, "steps": len(r.times_us), "step_p50_us": f"{p50:.1f}",
                     "step_p99_us": f"{p99:.1f}", "topk_stage_us": stage, "exact": verdict})
    return rows


COLUMNS = ["mps", "shape", "k", "provider", "mode", "steps", "step_p50_us", "step_p99_us",
           "topk_stage_us", "exact"]


def print_table(rows):
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in COLUMNS}
    print("  ".join(c.ljust(widths[c]) for c in COLUMNS))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in COLUMNS))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="", help="topk-server (--enable_regions), e.g. "
                                                  "unix:/tmp/topk-bench.sock; empty: no "
                                                  "channel / rpc")
    ap.add_argument("--libtopk", default="", help="libtopk_c.so for the inprocess provider "
                                                  "when topk_client.inprocess is missing")
    ap.add_argument("--csv", default="frontend.csv")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxN,... (rows x row length)")
    ap.add_argument("--ks", default="2048,512")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--steps", type=int, default=200, help="timed steps per provider and mode")
    ap.add_argument("--block", type=int, default=20, help="steps per round-robin block")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up steps (each checked)")
    ap.add_argument("--graph", action="store_true", help="also replay whole steps as CUDA graphs")
    ap.add_argument("--causal_stride", type=int, default=1)
    ap.add_argument("--consumer_mib", type=int, default=64,
                    help="largest value gather of the consumer; above it, a gather of scores")
    ap.add_argument("--mps", default="", help="label of the MPS column (default: the "
                                              "server's ServerInfo.mps, else 'unknown')")
    args = ap.parse_args()
    args.providers = [p for p in args.providers.split(",") if p]
    for p in args.providers:
        if p not in PROVIDERS:
            ap.error(f"--providers: {p!r} is not one of {', '.join(PROVIDERS)}")
    args.block = max(1, min(args.block, args.steps))
    return args


def main():
    args = parse_args()
    device = torch.device("cuda", 0)
    torch.cuda.init()
    torch.cuda.current_stream(device)
    matmul_kind, matmul = fp32_matmul()
    zc = None
    if args.target:
        from topk_client import ZeroCopyClient
        zc = ZeroCopyClient(args.target)
        info = zc.client.server_info()
        if not args.mps:
            args.mps = "on" if info.mps else "off"
        print(f"server {args.target}: channels_enabled={info.channels_enabled} mps={info.mps}")
    args.mps = args.mps or "unknown"
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, producer: "
          f"{matmul_kind}, MPS {args.mps}")
    rows = []
    t0 = time.monotonic()
    try:
        for shape in args.shapes.split(","):
            m, n = (int(v) for v in shape.lower().split("x"))
            for k in (int(v) for v in args.ks.split(",")):
                shape_rows = bench_shape(args, zc, m, n, k, device, matmul)
                rows += shape_rows
                print_table(shape_rows)
                torch.cuda.empty_cache()
    finally:
        if zc is not None:
            zc.close()
    with open(args.csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"== all shapes ({time.monotonic() - t0:.0f} s), {args.csv}")
    print_table(rows)
    bad = [r for r in rows if r["exact"].startswith("NO")]
    for r in bad:
        print(f"INEXACT: {r['provider']} {r['mode']} {r['shape']} k={r['k']}: {r['exact']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
