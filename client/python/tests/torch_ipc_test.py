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

        # Another view of the same storage (the region cache's by-storage
        # entry): rows 2.. at their own offset, no new registration.
        tail = scores[2:]
        got = topk.select(tail, lengths[2:], k)
        torch.cuda.current_stream().synchronize()
        check(tail, lengths[2:].cpu(), k, got)
        assert len(topk.session.list()) == registered, "a view of a known storage was registered"

        # The storage freed and its segment handed back to the driver, then a
        # new allocation of the same size (often at the same address) with
        # other rows: a cache hit on the dead storage would select the old
        # rows, so the answer is checked against the new ones.
        old_ptr = scores.data_ptr()
        del scores, pool, tail
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        pool = torch.empty(m * n + 4096, device=device)
        scores = pool[1024:1024 + m * n].view(m, n)
        scores.copy_((torch.randn(m, n, device=device) * 16).round() / 16 + 1000.0)
        topk.select(scores, lengths, k, out=out, values=values)
        torch.cuda.current_stream().synchronize()
        check(scores, lengths.cpu(), k, out, values)
        print(f"reallocated rows {'at the same address' if scores.data_ptr() == old_ptr else 'moved'}:"
              " exact")

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
