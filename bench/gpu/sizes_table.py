#!/usr/bin/env python3
"""The resident route's phases and cluster sizes (tools/gpu-lab/decode-peers.sh phases, sizes):
per K and shape, the planner's choice beside the route it replaces on the same rows
(phases_k<K>.csv: --alt_resident=-1), with the mean frontier, the per-row phase timers
(load and exchange / gather / refine / output, rank 0's clock) and, when the sizes step ran,
the route's median at each forced cluster size (sizes_k<K>_c<size>.csv).

usage: sizes_table.py --dir RAW --out-csv FILE
"""
import argparse
import csv
import glob
import os
import re


def load(path):
    with open(path) as f:
        return {(int(r["M"]), int(r["N"])): r for r in csv.DictReader(f)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out-csv", required=True)
    args = ap.parse_args()
    rows = []
    for path in sorted(glob.glob(os.path.join(args.dir, "phases_k*.csv"))):
        k = int(re.match(r"phases_k(\d+)\.csv", os.path.basename(path)).group(1))
        planner = load(path)
        sizes = {int(re.search(r"_c(\d+)\.csv", p).group(1)): load(p)
                 for p in glob.glob(os.path.join(args.dir, f"sizes_k{k}_c*.csv"))}
        for shape in sorted(planner):
            p = planner[shape]
            out = {"k": k, "m": shape[0], "n": shape[1], "planner_us": float(p["ours_ms"]) * 1e3,
                   "planner_p99_us": float(p["ours_p99_ms"]) * 1e3, "planner_route": p["route"],
                   "planner_frontier": float(p["mean_candidates"]),
                   "planner_phases_us": "/".join(f"{float(p[c]):.1f}" for c in (
                       "us_proposal", "us_admit", "us_refine", "us_finalize")),
                   "previous_route": p.get("alt_route", ""),
                   "previous_route_us": float(p["alt_ms"]) * 1e3 if p.get("alt_ms") else None,
                   "floor_us": float(p["floor_ms"]) * 1e3, "bad_rows": int(p["bad_rows"])}
            for size, table in sorted(sizes.items()):
                r = table.get(shape)
                if r is None:
                    continue
                out[f"c{size}_us"] = float(r["ours_ms"]) * 1e3
                out[f"c{size}_cands"] = float(r["mean_candidates"])
                out[f"c{size}_phases_us"] = "/".join(
                    f"{float(r[c]):.1f}" for c in ("us_proposal", "us_admit", "us_refine", "us_finalize"))
                out["bad_rows"] += int(r["bad_rows"])
            rows.append(out)
    fields = sorted({key for r in rows for key in r}, key=lambda f: (f[0] != "k", f))
    with open(args.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, ["k", "m", "n", "floor_us", "planner_route", "planner_us", "planner_p99_us",
                               "planner_frontier", "planner_phases_us", "previous_route",
                               "previous_route_us", "bad_rows"] +
                           [x for x in fields if x.startswith("c")])
        w.writeheader()
        for r in rows:
            w.writerow({key: (round(v, 2) if isinstance(v, float) else v) for key, v in r.items()})
    for r in rows:
        cells = "  ".join(f"c{s}={r.get(f'c{s}_us', 0):.1f}({r.get(f'c{s}_phases_us', '')};{r.get(f'c{s}_cands', 0):.0f})"
                          for s in (2, 4, 8, 16) if f"c{s}_us" in r)
        prev = f"{r['previous_route_us']:.1f}" if r["previous_route_us"] else "-"
        print(f"K={r['k']} {r['m']:>3}x{r['n']:<6} plan {r['planner_us']:.1f} prev {prev} bad {r['bad_rows']} | {cells}")


if __name__ == "__main__":
    main()
