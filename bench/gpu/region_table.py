#!/usr/bin/env python3
"""The resident route's region (tools/gpu-lab/decode-peers.sh region): per K
and shape, the route forced (topk-bench-gpu --resident=1) beside the route the
planner takes without it (--alt_resident=-1) on the same rows, their ratio,
and whether the planner's cells (kResidentRegion, route_policies.h, given
here as --cells K:N:M,...) take the shape.

usage: region_table.py --dir RAW --cells 1024:65536:64,... --out-csv FILE
"""
import argparse
import csv
import glob
import os


def in_region(cells, k, m, n):
    band = min((c[0] for c in cells if c[0] >= k), default=None)
    return band is not None and n >= 16384 and any(
        c[0] == band and n <= c[1] and m <= c[2] for c in cells)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cells", required=True)
    ap.add_argument("--out-csv", required=True)
    a = ap.parse_args()
    cells = [tuple(int(x) for x in c.split(":")) for c in a.cells.split(",")]
    rows = []
    for path in sorted(glob.glob(os.path.join(a.dir, "region_k*.csv"))):
        with open(path) as f:
            for r in csv.DictReader(f):
                k, m, n = int(r["K"]), int(r["M"]), int(r["N"])
                ours, alt = float(r["ours_ms"]) * 1e3, float(r["alt_ms"]) * 1e3
                rows.append({
                    "k": k, "m": m, "n": n, "dtype": r["dtype"],
                    "resident_us": round(ours, 2), "resident_p99_us": round(float(r["ours_p99_ms"]) * 1e3, 2),
                    "other_route": r["alt_route"], "other_us": round(alt, 2),
                    "resident_over_other": round(ours / alt, 3),
                    "bad_rows": r["bad_rows"], "in_region": in_region(cells, k, m, n),
                })
    rows.sort(key=lambda r: (-r["k"], r["n"], r["m"]))
    with open(a.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(f"K={r['k']:5d} {r['m']:4d} x {r['n'] // 1024:4d}K resident {r['resident_us']:7.1f} "
              f"{r['other_route']:>20s} {r['other_us']:7.1f} ratio {r['resident_over_other']:.2f}"
              f" {'in' if r['in_region'] else 'out'}")


if __name__ == "__main__":
    main()
