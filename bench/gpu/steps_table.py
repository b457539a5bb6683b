#!/usr/bin/env python3
"""Builds side by side (tools/gpu-lab/decode-peers.sh variants: the resident route; or
any route's topk-bench-gpu runs named alike): the timers of each build's topk-bench-gpu
on the same shapes, interleaved rounds in one call (<prefix>_<build>_k<K>_r<round>.csv,
prefix "var" unless --prefix). One row per build, round and shape: the median and p99,
the ranked bin's entries (the mean candidates on other routes), the resident route's six
step timers (load, its barrier, exchange, boundary, gather, its barrier; empty on other
routes), the four phase timers, the inexact rows and the score type; and, printed, each
shape's median per build (mean over rounds) and its ratio to the first build.

usage: steps_table.py --dir RAW --builds base,new[,...] [--labels "main abc,new def"]
                      [--prefix var] --out-csv FILE
"""
import argparse
import collections
import csv
import glob
import os
import re

STEPS = ["load_us", "load_barrier_us", "exchange_us", "boundary_us", "gather_us",
         "gather_barrier_us"]
HEADER = (["build", "round", "k", "m", "n", "route", "block", "median_us", "p99_us",
           "bin_entries"] + STEPS +
          ["proposal_us", "admit_us", "refine_us", "finalize_us", "bad_rows", "dtype"])


def rows_of(path, label, rnd):
    with open(path) as f:
        for r in csv.DictReader(f):
            steps = r["steps_us"].split("/")
            if len(steps) != len(STEPS):
                steps = [""] * len(STEPS)
            yield ([label, rnd, r["K"], r["M"], r["N"], r["route"], r["block"],
                    round(float(r["ours_ms"]) * 1000, 2),
                    round(float(r["ours_p99_ms"]) * 1000, 2), r["mean_candidates"]] + steps +
                   [r["us_proposal"], r["us_admit"], r["us_refine"], r["us_finalize"],
                    r["bad_rows"], r.get("dtype", "fp32")])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--builds", required=True, help="file names, the reference first")
    ap.add_argument("--labels", default="", help="what each build is, same order")
    ap.add_argument("--prefix", default="var", help="the runs' file prefix")
    ap.add_argument("--out-csv", required=True)
    a = ap.parse_args()
    builds = a.builds.split(",")
    labels = a.labels.split(",") if a.labels else builds
    if len(labels) != len(builds):
        raise SystemExit("--labels: one per build")
    out = []
    for build, label in zip(builds, labels):
        paths = glob.glob(os.path.join(a.dir, f"{a.prefix}_{build}_k*_r*.csv"))
        if not paths:
            raise SystemExit(f"no {a.prefix}_{build}_k*_r*.csv in {a.dir}")
        for path in sorted(paths):
            rnd = re.search(r"_r(\d+)\.csv$", path).group(1)
            out.extend(rows_of(path, label, rnd))
    with open(a.out_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows(out)
    medians = collections.defaultdict(list)
    for r in out:
        medians[(r[-1], int(r[2]), int(r[3]), int(r[4]), r[0])].append(r[7])
    shapes = sorted({key[:4] for key in medians}, key=lambda s: (s[0], -s[1], s[3], s[2]))
    print(" type    K      shape  " + "  ".join(f"{label[:18]:>18}" for label in labels))
    for s in shapes:
        means = [sum(medians[s + (lb,)]) / len(medians[s + (lb,)]) if medians[s + (lb,)]
                 else float("nan") for lb in labels]
        cells = [f"{means[0]:18.2f}"] + [f"{m:11.2f} {m / means[0]:5.3f}x" for m in means[1:]]
        print(f"{s[0]:>5} {s[1]:4d} {s[2]:4d} x {s[3]:<7d}" + "  ".join(cells))
    bad = sum(int(r[-2] or 0) for r in out)
    print(f"# wrote {a.out_csv}: {len(out)} rows; inexact rows over all timed outputs: {bad}")


if __name__ == "__main__":
    main()
