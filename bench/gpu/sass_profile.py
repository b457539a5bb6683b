#!/usr/bin/env python3
"""Where a kernel's warp-stall samples fall, from Nsight Compute's per-instruction
SASS export (`ncu -i REP --page source --csv --print-source sass`, as
tools/gpu-lab/decode-peers.sh profile writes it).

The export names no functions, so the listing is cut into regions at each
return and each cluster-barrier wait: a __noinline__ device function is the
region that ends at its RET, a cluster.sync ends at its UCGABAR_WAIT. Per
region: its samples (share of the kernel's), the most any of its instructions
executed (a loop shows thousands) and the instructions that mark it (global
loads, shared atomics, barriers); then the hottest instructions.

usage: sass_profile.py FILE.csv [--top N]
"""
import argparse
import collections
import csv

MARKS = ("LDG", "ATOMS", "BAR.SYNC", "UCGABAR_WAIT", "ERRBAR", "STS.128", "LDS.128", "CALL", "EXIT")


def opcode(source):
    words = source.split()
    if not words:
        return ""
    return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    with open(args.csv) as f:
        rows = list(csv.reader(f))
    header = next(i for i, r in enumerate(rows) if "Address" in r and "Source" in r)
    cols = rows[header]
    src, samples, executed = (cols.index(c) for c in (
        "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"))
    data = [(i, r[src].strip(), int(r[samples] or 0), int(r[executed] or 0))
            for i, r in enumerate(rows[header + 1:])]
    total = sum(s for _, _, s, _ in data) or 1
    print(f"{total} samples over {len(data)} instructions")
    start, acc, most, marks = 0, 0, 0, collections.Counter()
    for i, text, s, n in data:
        op = opcode(text)
        acc, most = acc + s, max(most, n)
        for m in MARKS:
            if op.startswith(m):
                marks[m] += 1
        if op.startswith("RET") or op == "UCGABAR_WAIT" or i == len(data) - 1:
            if acc:
                kinds = " ".join(f"{m}x{c}" for m, c in sorted(marks.items()))
                print(f"  [{start:5d}, {i:5d}] {acc:6d} samples {100 * acc / total:5.1f} %"
                      f"  executed <= {most:7d}  {kinds}")
            start, acc, most, marks = i + 1, 0, 0, collections.Counter()
    print(f"hottest {args.top}:")
    for i, text, s, n in sorted(data, key=lambda d: -d[2])[:args.top]:
        print(f"  {i:5d} {s:5d} {100 * s / total:5.1f} %  executed {n:7d}  {text[:80]}")


if __name__ == "__main__":
    main()
