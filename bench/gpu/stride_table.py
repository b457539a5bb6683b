#!/usr/bin/env python3
"""The stride sweep's table (tools/gpu-lab/stride-sweep.sh): per shape the
route, each stride's median, band-rescue and exact-recovery rates and
proposal time per row, and stride 32's time over stride 64's.

usage: stride_table.py OUT_DIR [--csv FILE]
"""
import argparse
import csv
import os

SETS = [("k512", 512), ("k2048", 2048), ("long", 2048)]
FIELDS = ["ours_ms", "band_rate", "exact_rate", "us_proposal", "mean_candidates", "verified"]


def load(path):
    with open(path) as f:
        return {(r["M"], r["N"]): r for r in csv.DictReader(f)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--csv", default="")
    args = ap.parse_args()
    out = []
    for name, k in SETS:
        s64 = os.path.join(args.dir, f"{name}_s64.csv")
        s32 = os.path.join(args.dir, f"{name}_s32.csv")
        if not (os.path.exists(s64) and os.path.exists(s32)):
            continue
        a, b = load(s64), load(s32)
        for key, x in a.items():
            y = b.get(key)
            if y is None:
                continue
            row = {"K": k, "M": key[0], "N": key[1], "route": x["route"], "block": x["block"]}
            for f in FIELDS:
                row[f"s64_{f}"] = x[f]
                row[f"s32_{f}"] = y[f]
            row["s32_over_s64"] = "%.3f" % (float(y["ours_ms"]) / float(x["ours_ms"]))
            out.append(row)
    if args.csv and out:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0].keys()))
            w.writeheader()
            w.writerows(out)
    print("K     M     N        route               s64 ms   s32 ms  band64  band32  s32/s64")
    for r in out:
        print("%-5s %-5s %-8s %-19s %.4f  %.4f  %.4f  %.4f  %s" % (
            r["K"], r["M"], r["N"], r["route"], float(r["s64_ours_ms"]), float(r["s32_ours_ms"]),
            float(r["s64_band_rate"]), float(r["s32_band_rate"]), r["s32_over_s64"]))

if __name__ == "__main__":
    main()
