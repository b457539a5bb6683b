#!/usr/bin/env python3
"""Merges topk-bench-gpu's short-row A/B CSVs (one per K; the main selector
with the short-row route off = the default before it, the alt selector with
the route forced) with torch_baseline.py's CSV into one CSV, and prints the
crossover table: per shape the faster route and by how much."""
import argparse
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", nargs="+", required=True, help="topk-bench-gpu CSVs")
    ap.add_argument("--torch", default="", help="torch_baseline.py CSV (K = its --k)")
    ap.add_argument("--out-csv", required=True)
    args = ap.parse_args()
    torch_rows = {}
    if args.torch:
        try:
            for r in csv.DictReader(open(args.torch)):
                torch_rows[(int(r["M"]), int(r["N"]), int(r["K"]))] = float(r["torch_ms"])
        except FileNotFoundError:
            pass
    merged = []
    for path in args.ours:
        try:
            rows = list(csv.DictReader(open(path)))
        except FileNotFoundError:
            continue
        for r in rows:
            key = (int(r["M"]), int(r["N"]), int(r["K"]))
            before, short, floor = float(r["ours_ms"]), float(r["alt_ms"]), float(r["floor_ms"])
            t = torch_rows.get(key)
            merged.append({
                "M": key[0], "N": key[1], "K": key[2],
                "floor_ms": f"{floor:.5f}",
                "before_route": r["route"], "before_block": r["block"],
                "before_ms": f"{before:.5f}",
                "short_row_route": r["alt_route"],
                "short_row_ms": f"{short:.5f}",
                "short_over_before": f"{short / before:.4f}",
                "short_over_floor": f"{short / floor:.4f}",
                "torch_ms": f"{t:.5f}" if t else "",
                "short_over_torch": f"{short / t:.4f}" if t else "",
                "sampling_off_ms": r["exact_ms"],
                "short_candidates_per_row": r.get("alt_mean_candidates", ""),
                "short_us_localise": r["alt_us_proposal"], "short_us_collect": r["alt_us_admit"],
                "short_us_refine": r["alt_us_refine"], "short_us_output": r["alt_us_finalize"],
                "bad_rows": r["bad_rows"], "read_bw_TBps": r["read_bw_TBps"],
                "verified": r["verified"],
            })
    merged.sort(key=lambda r: (r["K"], r["N"], r["M"]))
    if not merged:
        print("no rows")
        return
    with open(args.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(merged[0].keys()))
        w.writeheader()
        w.writerows(merged)
    print(f"{'K':>5} {'N':>6} {'M':>5} {'floor':>8} {'before':>8} {'short':>8} {'torch':>8} "
          f"{'s/b':>6} {'s/floor':>7} before-route")
    for r in merged:
        print(f"{r['K']:>5} {r['N']:>6} {r['M']:>5} {float(r['floor_ms']):8.4f} "
              f"{float(r['before_ms']):8.4f} {float(r['short_row_ms']):8.4f} "
              f"{r['torch_ms'] or '-':>8} {float(r['short_over_before']):6.3f} "
              f"{float(r['short_over_floor']):7.2f} {r['before_route']}/{r['before_block']}")
    bad = sum(int(r["bad_rows"]) for r in merged)
    print(f"# inexact rows over all timed outputs: {bad}")


if __name__ == "__main__":
    main()
