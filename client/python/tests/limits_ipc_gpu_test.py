"""Issue 20 on a GPU: prefill batches by CUDA IPC against a topk-server with
the DEFAULT limits (only --enable_regions and the listen address given):
2048 x 64K and 8192 x 128K FP32 rows (512 MiB and 4 GiB, past the default
--max_batch_bytes of 256 MiB, which rows read in place on their GPU do not
count against), answers in place on the GPU (out=), lengths on the GPU and,
for 2048 x 64K, inline as well. Every 97th row is checked against
torch.topk (same multiset of values).

Usage: limits_ipc_gpu_test.py --target unix:/path
"""
import argparse
import sys

import torch

from exactness import check

from topk_client import ZeroCopyClient


def check_rows(scores, lengths, k, indices, step=97):
    """Every step-th row, exact (exactness.check on those rows)."""
    check(scores[::step], lengths[::step], k, indices[::step])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    args = parser.parse_args()
    torch.manual_seed(20)
    device = torch.device("cuda", 0)
    k = 2048
    with ZeroCopyClient(args.target) as topk:
        limits = topk.client.server_info().limits
        assert limits.max_rows == 8192, limits
        for m, n in ((2048, 65536), (8192, 131072)):
            scores = (torch.randn(m, n, device=device) * 16).round() / 16  # ties
            lengths = torch.randint(k // 2, n + 1, (m,), device=device, dtype=torch.int32)
            lengths[0] = k // 4
            out = torch.empty((m, k), dtype=torch.int32, device=device)
            assert topk.select(scores, lengths, k, out=out) is out
            torch.cuda.current_stream().synchronize()
            check_rows(scores, lengths.cpu(), k, out)
            print(f"{m} x {n} FP32 by CUDA IPC ({m * n * 4 >> 20} MiB), answer on the GPU: exact")
            if m == 2048:
                inline = topk.select(scores, lengths.cpu().tolist(), k, ordering="host")
                torch.cuda.current_stream().synchronize()
                check_rows(scores, lengths.cpu(), k, inline)
            del scores, out
            torch.cuda.empty_cache()
    print("prefill batches by reference on a default server: exact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
