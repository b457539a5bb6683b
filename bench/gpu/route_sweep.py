#!/usr/bin/env python3
"""The route sweep's table (tools/gpu-lab/route-sweep.sh): per shape, every
configuration's median and p99 over the floor, the fastest configuration and
the planner's time over it.

With --emit FILE, writes the planner's table (kernels/src/planner/
route_table_data.h) from the FP32 shapes: per shape the fastest
configuration whose p99 is within --tail of the rules' p99, or the rules
where they measured within --noise of it.
The rules' time is the "rules" configuration's (--route_table=false), else
the "planner" one's.

usage: route_sweep.py OUT_DIR [--csv FILE] [--emit FILE] [--noise 0.03] [--tail 0.2]
"""
import argparse
import csv
import glob
import os
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--csv", default="")
    ap.add_argument("--emit", default="")
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument("--tail", type=float, default=0.2)
    ap.add_argument("--source", default="tools/gpu-lab/route-sweep.sh on the H200")
    args = ap.parse_args()
    shapes = {}
    for path in sorted(glob.glob(os.path.join(args.dir, "sweep_*.csv"))):
        m = re.match(r"sweep_(\w+?)_k(\d+)_(\w+)\.csv", os.path.basename(path))
        if not m:
            continue
        dtype, k, config = m.group(1), int(m.group(2)), m.group(3)
        with open(path) as f:
            for r in csv.DictReader(f):
                if int(r["bad_rows"]) != 0:
                    raise SystemExit(f"{path}: inexact rows at {r['M']}x{r['N']}")
                key = (dtype, k, int(r["M"]), int(r["N"]))
                shapes.setdefault(key, {})[config] = (
                    float(r["ours_ms"]) * 1e3, float(r["ours_p99_ms"]) * 1e3,
                    float(r["floor_ms"]) * 1e3, r["route"], int(r["block"]))
    rows = []
    for key in sorted(shapes):
        configs = shapes[key]
        best = min(configs, key=lambda c: configs[c][0])
        floor = configs[best][2]
        planner = configs.get("planner")
        rows.append(dict(
            dtype=key[0], K=key[1], M=key[2], N=key[3], floor_us=round(floor, 2),
            chosen_route=planner[3] if planner else "",
            chosen_us=round(planner[0], 2) if planner else "",
            best=best, best_route=configs[best][3], best_us=round(configs[best][0], 2),
            best_p99_us=round(configs[best][1], 2),
            chosen_over_best=round(planner[0] / configs[best][0], 3) if planner else "",
            **{f"{c}_us": round(v[0], 2) for c, v in configs.items()},
            **{f"{c}_p99_us": round(v[1], 2) for c, v in configs.items()}))
    names = []
    for r in rows:
        for c in r:
            if c not in names:
                names.append(c)
    print(f"{'dtype':5} {'K':>5} {'M':>5} {'N':>7} {'floor':>7} {'planner':>9} {'route':>18} "
          f"{'best':>10} {'us':>9} {'p99':>9} {'plan/best':>9}")
    for r in rows:
        print(f"{r['dtype']:5} {r['K']:5} {r['M']:5} {r['N']:7} {r['floor_us']:7} "
              f"{r['chosen_us']:>9} {r['chosen_route']:>18} {r['best']:>10} {r['best_us']:9} "
              f"{r['best_p99_us']:9} {r['chosen_over_best']:>9}")
    if args.emit:
        emit(shapes, args)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=names)
            w.writeheader()
            w.writerows(rows)


CHOICES = {
    "persist512": "kPersistent512", "persist256": "kPersistent256", "shortrow": "kShortRow",
    "kv2": "kKvSplit2", "kv4": "kKvSplit4", "kv8": "kKvSplit8", "cl8x1": "kCluster8x1",
    "cl8x2": "kCluster8x2", "cl16x1": "kCluster16x1",
}


def emit(shapes, args):
    lines = []
    for (dtype, k, m, n), configs in sorted(shapes.items(), key=lambda i: (i[0][1], i[0][3], i[0][2])):
        if dtype != "fp32":
            continue
        rules = configs.get("rules") or configs.get("planner")
        if rules is None:
            continue
        # A choice must not trade the median for a tail: its p99 within
        # --tail of the rules' p99.
        candidates = {c: v for c, v in configs.items()
                      if c in CHOICES and v[1] <= rules[1] * (1 + args.tail)}
        best = min(candidates, key=lambda c: candidates[c][0]) if candidates else None
        choice = "kRules"
        best_us = rules[0]
        if best is not None and candidates[best][0] * (1 + args.noise) < rules[0]:
            choice, best_us = CHOICES[best], candidates[best][0]
        lines.append(f"    {{{k}, {n}, {m}, TableChoice::{choice}, {best_us:.1f}, {rules[0]:.1f}}},")
    with open(args.emit, "w") as f:
        f.write("// The planner's measured route table (route_table.h): written by\n"
                "// bench/gpu/route_sweep.py --emit from " + args.source + "\n"
                "// (bench/results/h200_route_sweep.csv); regenerate, do not edit.\n"
                "// {max_k, max_width, max_rows, choice, choice's us, rules' us}\n"
                "inline constexpr RouteTableEntry kMeasuredRoutes[] = {\n")
        f.write("\n".join(lines) + "\n};\n")


if __name__ == "__main__":
    main()
