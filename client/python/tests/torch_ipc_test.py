"""ZeroCopyClient with torch CUDA tensors against a topk-server process on
the CUDA backend: scores, lengths and answers stay on the GPU (CUDA IPC),
each answer checked for exactness on the GPU against the rows themselves.
With --expect_unexportable, checks instead that a storage torch cannot
export (expandable segments) is refused with a clear error.

Usage: torch_ipc_test.py --target unix:/path [--expect_unexportable]
"""
import argparse
import sys
import time

import torch

from exactness import check

from topk_client import RegionError, ZeroCopyClient


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--expect_unexportable", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(3)
    device = torch.device("cuda", 0)
    with ZeroCopyClient(args.target) as topk:
        if args.expect_unexportable:
            scores = torch.randn(2, 1000, device=device)
            try:
                topk.select(scores, [1000, 1000], 8)
            except RegionError as e:
                assert "expandable" in str(e), e
                print("unexportable storage: refused with a clear error")
                return 0
            raise AssertionError("an expandable-segment storage was accepted")

        m, n, k = 8, 131072, 2048
        # A sub-block of the caching allocator's pool: the tensor sits at an
        # offset inside a larger allocation (torch's sharing format covers it).
        pool = torch.empty(m * n + 4096, device=device)
        scores = pool[1024:1024 + m * n].view(m, n)
        scores.copy_((torch.randn(m, n, device=device) * 16).round() / 16)  # ties
        lengths = torch.randint(k // 2, n + 1, (m,), device=device, dtype=torch.int32)
        lengths[0] = k // 4
        out = torch.full((m, k + 8), 777, dtype=torch.int32, device=device)
        values = torch.empty((m, k + 8), device=device)

        # Lengths on the GPU, answer and values in place, event-ordered.
        result = topk.select(scores, lengths, k, out=out, values=values)
        assert result is out
        torch.cuda.current_stream().synchronize()
        check(scores, lengths.cpu(), k, out, values)
        assert bool((out[:, k:] == 777).all()), "wrote past k"

        # Lengths inline, a new output tensor, host-synchronised ordering.
        new = topk.select(scores, lengths.cpu().tolist(), k, sorted=True, ordering="host")
        torch.cuda.current_stream().synchronize()
        check(scores, lengths.cpu(), k, new)

        # Rows written by a kernel just before the call, with no host sync:
        # the server's stream waits on the recorded event. The tensors are
        # the first call's: no allocation is registered again.
        registered = len(topk.session.list())
        scores.mul_(-1.0)
        topk.select(scores, lengths, k, out=out, values=values)
        torch.cuda.current_stream().synchronize()
        check(scores, lengths.cpu(), k, out, values)
        assert len(topk.session.list()) == registered, "an allocation was registered twice"

        # Latency of the natural call (p50 over 200 calls, 1 x 128K).
        one = scores[:1]
        one_len = lengths[:1]
        one_out = torch.empty((1, k), dtype=torch.int32, device=device)
        times = []
        for _ in range(220):
            t0 = time.perf_counter()
            topk.select(one, one_len, k, out=one_out)
            times.append(time.perf_counter() - t0)
        times = sorted(times[20:])
        print(f"python torch select 1x{n} k={k}: p50 {1e6 * times[len(times) // 2]:.0f} us, "
              f"p99 {1e6 * times[int(len(times) * 0.99)]:.0f} us")
    print("torch CUDA IPC regions: exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
