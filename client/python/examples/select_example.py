#!/usr/bin/env python3
"""Sends causal indexer-like rows to a topk-server and checks the answer.

    PYTHONPATH=build/python python3 client/python/examples/select_example.py --target 127.0.0.1:50051
"""
import argparse

import numpy as np

from topk_client import TopKClient


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--width", type=int, default=32768)
    parser.add_argument("--k", type=int, default=256)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = [rng.standard_normal(args.width - args.rows + 1 + r).astype(np.float32)
            for r in range(args.rows)]
    with TopKClient(args.target) as client:
        client.wait_for_serving(10)
        for stream in (False, True):
            call = client.select_streaming if stream else client.select
            result = call(rows, args.k, sorted=True, return_values=True)
            for r, row in enumerate(rows):
                expected = np.sort(row)[::-1][:args.k]
                assert np.array_equal(result.values[r], expected), f"row {r} inexact"
                assert np.array_equal(row[result.indices[r]], expected)
            print(f"{'stream' if stream else 'unary '}: {len(rows)} rows exact; server "
                  f"total {result.total_us} us (queue {result.queue_us}, device {result.device_us})")
        print("backend:", client.server_info().backend)


if __name__ == "__main__":
    main()
