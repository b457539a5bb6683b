#!/usr/bin/env python3
"""Merges topk-bench-gpu runs of one matrix on FP32, BF16 and FP16 rows (same
scores, rounded), the previous build's FP32 run (A/B) and torch.topk on FP32
and BF16 rows into one CSV, and prints the table and the geomeans: each type
against its own floor (sum(L) x element bytes at the measured read
bandwidth), BF16 against FP32, and FP32 against the previous build."""
import argparse
import csv
import math


def load(path, key_field="ours_ms"):
    if not path:
        return {}
    try:
        with open(path) as f:
            return {(int(r["M"]), int(r["N"])): r for r in csv.DictReader(f)}
    except FileNotFoundError:
        return {}


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def num(row, field):
    try:
        return float(row[field]) if row and row.get(field, "") != "" else None
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp32", required=True)
    ap.add_argument("--bf16", required=True)
    ap.add_argument("--fp16", default="")
    ap.add_argument("--baseline", default="", help="the previous build's FP32 CSV")
    ap.add_argument("--torch-fp32", default="")
    ap.add_argument("--torch-bf16", default="")
    ap.add_argument("--out-csv", required=True)
    args = ap.parse_args()
    fp32, bf16, fp16 = load(args.fp32), load(args.bf16), load(args.fp16)
    base, t32, t16 = load(args.baseline), load(args.torch_fp32), load(args.torch_bf16)
    rows = []
    for key in sorted(fp32, key=lambda t: (t[1], t[0])):
        a, b, h = fp32[key], bf16.get(key), fp16.get(key)
        r = {"M": key[0], "N": key[1], "K": a["K"], "route": a["route"],
             "fp32_ms": num(a, "ours_ms"), "fp32_floor_ms": num(a, "floor_ms"),
             "baseline_fp32_ms": num(base.get(key), "ours_ms"),
             "bf16_route": b["route"] if b else "", "bf16_ms": num(b, "ours_ms"),
             "bf16_floor_ms": num(b, "floor_ms"),
             "bf16_mean_candidates": num(b, "mean_candidates"),
             "bf16_band_rate": num(b, "band_rate"), "bf16_exact_rate": num(b, "exact_rate"),
             "fp16_ms": num(h, "ours_ms"), "fp16_floor_ms": num(h, "floor_ms"),
             "fp16_mean_candidates": num(h, "mean_candidates"),
             "torch_fp32_ms": num(t32.get(key), "torch_ms"),
             "torch_bf16_ms": num(t16.get(key), "torch_ms"),
             "bad_rows": sum(int(x["bad_rows"]) for x in (a, b, h) if x),
             "read_bw_TBps": a["read_bw_TBps"]}
        rows.append(r)
    with open(args.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.5f}" if isinstance(v, float) else ("" if v is None else v))
                        for k, v in r.items()})

    def ratio(r, x, y):
        return r[x] / r[y] if r[x] and r[y] else None

    print(f"{'M':>5} {'N':>8} {'fp32':>8} {'x':>5} {'base':>8} {'bf16':>8} {'x':>5} "
          f"{'bf16/32':>7} {'fp16':>8} {'x':>5} {'t_fp32':>8} {'t_bf16':>8} bad")
    for r in rows:
        def fmt(v, spec="8.4f"):
            return format(v, spec) if v is not None else " " * int(spec.split(".")[0])
        print(f"{r['M']:5d} {r['N']:8d} {fmt(r['fp32_ms'])} {fmt(ratio(r, 'fp32_ms', 'fp32_floor_ms'), '5.2f')} "
              f"{fmt(r['baseline_fp32_ms'])} {fmt(r['bf16_ms'])} "
              f"{fmt(ratio(r, 'bf16_ms', 'bf16_floor_ms'), '5.2f')} "
              f"{fmt(ratio(r, 'bf16_ms', 'fp32_ms'), '7.3f')} {fmt(r['fp16_ms'])} "
              f"{fmt(ratio(r, 'fp16_ms', 'fp16_floor_ms'), '5.2f')} {fmt(r['torch_fp32_ms'])} "
              f"{fmt(r['torch_bf16_ms'])} {r['bad_rows']}")
    print(f"# geomean fp32 / its floor: {geomean([ratio(r, 'fp32_ms', 'fp32_floor_ms') for r in rows]):.3f}")
    print(f"# geomean bf16 / its floor: {geomean([ratio(r, 'bf16_ms', 'bf16_floor_ms') for r in rows]):.3f}")
    print(f"# geomean fp16 / its floor: {geomean([ratio(r, 'fp16_ms', 'fp16_floor_ms') for r in rows]):.3f}")
    print(f"# geomean bf16 / fp32 time: {geomean([ratio(r, 'bf16_ms', 'fp32_ms') for r in rows]):.3f}")
    print(f"# geomean fp32 / previous build's fp32: "
          f"{geomean([ratio(r, 'fp32_ms', 'baseline_fp32_ms') for r in rows]):.3f}")
    print(f"# geomean torch.topk bf16 / ours bf16: "
          f"{geomean([ratio(r, 'torch_bf16_ms', 'bf16_ms') for r in rows]):.2f}")
    print(f"# geomean torch.topk fp32 / ours fp32: "
          f"{geomean([ratio(r, 'torch_fp32_ms', 'fp32_ms') for r in rows]):.2f}")
    print(f"# inexact rows over all timed outputs: {sum(r['bad_rows'] for r in rows)}")


if __name__ == "__main__":
    main()
