#!/usr/bin/env python3
"""The decode table (few long rows, K = 2048): the cluster route's variants
(8 or 16 CTAs per cluster, 1 or 2 CTAs per SM), the planner's choice and the
route the cluster route replaces (KV-split or persistent, the selector with it
off), each timed on the same data (topk-bench-gpu runs of the same shapes and
seeds), beside the one-scan floor and torch.topk; the median and the p99 of
every timed repetition (--times_csv; every timed output verified on the GPU).
Prints the table and the issue's targets for --primary; writes one CSV row
per shape."""
import argparse
import collections
import csv
import math


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_times(path):
    """(M, N) -> selector ('ours' / 'alt') -> (route, [ms])."""
    out = collections.defaultdict(dict)
    with open(path) as f:
        for line in f:
            dtype, m, n, k, sel, route, ms = line.strip().split(",")
            entry = out[(int(m), int(n))].setdefault(sel, (route, []))
            entry[1].append(float(ms))
    return out


def pct(v, q):
    """Nearest-rank percentile of v (q in (0, 100])."""
    s = sorted(v)
    return s[max(0, math.ceil(q / 100.0 * len(s)) - 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="append", required=True,
                    help="OURS[,ALT]=BENCH_CSV:TIMES_CSV (labels of the run's two selectors)")
    ap.add_argument("--torch", help="torch_baseline.py CSV (torch_ms, torch_p99_ms)")
    ap.add_argument("--primary", required=True, help="the label the targets are checked on")
    ap.add_argument("--baseline", required=True, help="the label of the replaced route")
    ap.add_argument("--out-csv", required=True)
    args = ap.parse_args()
    labels = []
    times = collections.defaultdict(dict)  # (M, N) -> label -> (route, [ms])
    floor = {}
    bad = 0
    k = "?"
    for spec in args.run:
        names, files = spec.split("=", 1)
        bench_csv, times_csv = files.split(":")
        names = names.split(",")
        for r in read_csv(bench_csv):
            floor[(int(r["M"]), int(r["N"]))] = float(r["floor_ms"]) * 1e3
            bad += int(r["bad_rows"])
            k = r["K"]
        for shape, sels in read_times(times_csv).items():
            for sel, label in zip(("ours", "alt"), names):
                if sel in sels:
                    times[shape][label] = sels[sel]
        labels += [n for n in names if n not in labels]
    torch = {}
    if args.torch:
        torch = {(int(r["M"]), int(r["N"])): r for r in read_csv(args.torch)}
    rows = []
    print(f"# decode shapes, K = {k}, us p50/p99 (route); inexact rows over all timed outputs: {bad}")
    print("# " + " ".join(f"{h:>15}" for h in ["shape", "floor"] + labels + ["torch"]))
    for (m, n) in sorted(times):
        row = {"M": m, "N": n, "K": k, "floor_us": f"{floor[(m, n)]:.2f}"}
        cells = [f"{m} x {n}", f"{floor[(m, n)]:.1f}"]
        for label in labels:
            route, v = times[(m, n)].get(label, ("", []))
            if not v:
                cells.append("-")
                continue
            row[f"{label}_route"] = route
            row[f"{label}_p50_us"] = f"{pct(v, 50) * 1e3:.2f}"
            row[f"{label}_p99_us"] = f"{pct(v, 99) * 1e3:.2f}"
            row[f"{label}_reps"] = len(v)
            cells.append(f"{pct(v, 50) * 1e3:.1f}/{pct(v, 99) * 1e3:.1f}")
        if (m, n) in torch:
            tr = torch[(m, n)]
            row["torch_p50_us"] = f"{float(tr['torch_ms']) * 1e3:.2f}"
            row["torch_p99_us"] = f"{float(tr.get('torch_p99_ms', 'nan')) * 1e3:.2f}"
            cells.append(f"{row['torch_p50_us']}/{row['torch_p99_us']}")
        p, b = args.primary, args.baseline
        if f"{p}_p50_us" in row and f"{b}_p50_us" in row:
            row[f"{b}_over_{p}"] = f"{float(row[f'{b}_p50_us']) / float(row[f'{p}_p50_us']):.3f}"
        if f"{p}_p50_us" in row:
            row[f"{p}_over_floor"] = f"{float(row[f'{p}_p50_us']) / floor[(m, n)]:.2f}"
            row[f"{p}_p99_over_p50"] = (
                f"{float(row[f'{p}_p99_us']) / float(row[f'{p}_p50_us']):.3f}")
        rows.append(row)
        print("  " + " ".join(f"{c:>15}" for c in cells) + "   " +
              " ".join(f"{times[(m, n)][label][0]}" for label in labels if label in times[(m, n)]))
    keys = []
    for row in rows:
        keys += [key for key in row if key not in keys]
    with open(args.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    # The targets on the primary label's median; p99 <= 1.2 x p50.
    p = args.primary
    by = {(row["M"], row["N"]): row for row in rows}

    def p50(m, n):
        return float(by[(m, n)].get(f"{p}_p50_us", "nan")) if (m, n) in by else float("nan")

    def fl(m, n):
        return floor.get((m, n), float("nan"))

    def verdict(ok):
        return "met" if ok else "not met"

    print(f"# targets ({p}):")
    for m in (1, 8):
        print(f"#   {m} x 1M within floor + 12 us: {p50(m, 1 << 20):.1f} <= "
              f"{fl(m, 1 << 20) + 12:.1f}: {verdict(p50(m, 1 << 20) <= fl(m, 1 << 20) + 12)}")
    print(f"#   1 x 128K <= 10 us: {p50(1, 131072):.1f}: {verdict(p50(1, 131072) <= 10)}")
    print(f"#   64 x 1M <= 1.5 x floor: {p50(64, 1 << 20):.1f} <= {1.5 * fl(64, 1 << 20):.1f}: "
          f"{verdict(p50(64, 1 << 20) <= 1.5 * fl(64, 1 << 20))}")
    ratios = [(float(row[f"{p}_p99_over_p50"]), row["M"], row["N"]) for row in rows
              if f"{p}_p99_over_p50" in row]
    if ratios:
        worst = max(ratios)
        print(f"#   p99 <= 1.2 x p50: worst {worst[0]:.3f} at {worst[1]} x {worst[2]}: "
              f"{verdict(worst[0] <= 1.2)}")
    return 0 if bad == 0 else 3


if __name__ == "__main__":
    raise SystemExit(main())
