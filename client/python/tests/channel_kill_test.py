"""A client killed (SIGKILL) while it makes channel calls: the server must
release the dead client's channel within 1 s (GetStats().channels_open drops)
and keep serving another client's channel, whose per-call latency before and
after the kill is reported (p50 and p99 over the same number of calls).

Usage: channel_kill_test.py --target unix:/path
"""
import argparse
import os
import signal
import subprocess
import sys
import time

import torch

from topk_client import ZeroCopyClient
from topk_client.client import topk_pb2

K, ROWS, WIDTH = 2048, 8, 131072


def buffers(device):
    gen = torch.Generator(device=device).manual_seed(3)
    scores = torch.rand((ROWS, WIDTH), device=device, generator=gen) + 0.5
    lengths = torch.full((ROWS,), WIDTH, dtype=torch.int32, device=device)
    out = torch.empty((ROWS, K), dtype=torch.int32, device=device)
    return scores, lengths, out


def child(target):
    with ZeroCopyClient(target) as topk:
        ch = topk.channel(k=K, max_rows=ROWS, max_width=WIDTH)
        scores, lengths, out = buffers("cuda:0")
        ch.select(scores, lengths, out=out, check=True)
        print("calling", flush=True)
        while True:  # until killed
            for _ in range(50):
                ch.select(scores, lengths, out=out)
            torch.cuda.synchronize()


def stats(topk):
    return topk.client._stub.GetStats(topk_pb2.GetStatsRequest())


def timed_calls(ch, scores, lengths, out, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        ch.select(scores, lengths, out=out)
        torch.cuda.current_stream().synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    if args.child:
        child(args.target)
        return 0
    with ZeroCopyClient(args.target) as topk:
        ch = topk.channel(k=K, max_rows=ROWS, max_width=WIDTH)
        scores, lengths, out = buffers("cuda:0")
        ch.select(scores, lengths, out=out, check=True)
        proc = subprocess.Popen([sys.executable, __file__, "--target", args.target, "--child"],
                                stdout=subprocess.PIPE, text=True)
        if proc.stdout.readline().strip() != "calling":
            print("FAIL: the child never started calling")
            return 1
        before = timed_calls(ch, scores, lengths, out, args.calls)
        opened = stats(topk).channels_open
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        t0 = time.monotonic()
        while stats(topk).channels_open >= opened and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        released_s = time.monotonic() - t0
        after = timed_calls(ch, scores, lengths, out, args.calls)
        ch.check()
        s = stats(topk)
        ok = s.channels_open == opened - 1 and released_s < 1.0
        print(f"kill: channels {opened} -> {s.channels_open} in {released_s * 1e3:.0f} ms; "
              f"other client's call p50/p99 before {before[0]:.1f}/{before[1]:.1f} us, "
              f"after {after[0]:.1f}/{after[1]:.1f} us (with the dying client beside it before)")
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
