#!/usr/bin/env python3
"""The model-shape table (tools/gpu-lab/gpu-check.sh models): per K, dtype and
shape, our median and p99 over the floor, the baseline build's (the previous
main, same data, same call), torch.topk's, and BF16 over FP32, from the raw
CSVs ours_<dtype>_k<K>.csv, baseline_<dtype>_k<K>.csv, torch_<dtype>_k<K>.csv.

usage: model_table.py --dir RAW --out-csv FILE
"""
import argparse
import csv
import glob
import os
import re


def load(path, time_key, p99_key):
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for r in csv.DictReader(f):
            if "bad_rows" in r and int(r["bad_rows"]) != 0:
                raise SystemExit(f"{path}: inexact rows at {r['M']} x {r['N']}")
            out[(int(r["M"]), int(r["N"]))] = r | {"p50_us": float(r[time_key]) * 1e3,
                                                   "p99_us": float(r[p99_key]) * 1e3}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out-csv", required=True)
    args = ap.parse_args()
    rows = []
    for path in sorted(glob.glob(os.path.join(args.dir, "ours_*_k*.csv"))):
        dtype, k = re.match(r"ours_(\w+)_k(\d+)\.csv", os.path.basename(path)).groups()
        ours = load(path, "ours_ms", "ours_p99_ms")
        base = load(os.path.join(args.dir, f"baseline_{dtype}_k{k}.csv"), "ours_ms", "ours_p99_ms")
        torch = load(os.path.join(args.dir, f"torch_{dtype}_k{k}.csv"), "torch_ms", "torch_p99_ms")
        fp32 = load(os.path.join(args.dir, f"ours_fp32_k{k}.csv"), "ours_ms", "ours_p99_ms")
        for (m, n), r in ours.items():
            floor = float(r["floor_ms"]) * 1e3
            b, t, w = base.get((m, n)), torch.get((m, n)), fp32.get((m, n))
            rows.append({
                "K": int(k), "M": m, "N": n, "dtype": dtype, "route": r["route"],
                "block": r["block"], "floor_us": round(floor, 2),
                "ours_p50_us": round(r["p50_us"], 2), "ours_p99_us": round(r["p99_us"], 2),
                "ours_over_floor": round(r["p50_us"] / floor, 2),
                "baseline_p50_us": round(b["p50_us"], 2) if b else "",
                "baseline_p99_us": round(b["p99_us"], 2) if b else "",
                "baseline_route": b["route"] if b else "",
                "ours_over_baseline": round(r["p50_us"] / b["p50_us"], 3) if b else "",
                "torch_p50_us": round(t["p50_us"], 2) if t else "",
                "torch_p99_us": round(t["p99_us"], 2) if t else "",
                "torch_over_ours": round(t["p50_us"] / r["p50_us"], 2) if t else "",
                "over_fp32": round(r["p50_us"] / w["p50_us"], 3) if w and dtype != "fp32" else "",
                "band_rate": r["band_rate"], "exact_rate": r["exact_rate"],
                "read_bw_TBps": r["read_bw_TBps"], "verified": r["verified"],
            })
    rows.sort(key=lambda r: (r["K"], r["dtype"] != "fp32", r["N"], r["M"]))
    with open(args.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"{'K':>4} {'dtype':5} {'M':>5} {'N':>7} {'floor':>7} {'p50':>8} {'p99':>8} {'x fl':>6} "
          f"{'base':>8} {'/base':>6} {'torch':>8} {'t/ours':>6} {'/fp32':>6} route")
    for r in rows:
        print(f"{r['K']:4} {r['dtype']:5} {r['M']:5} {r['N']:7} {r['floor_us']:7} "
              f"{r['ours_p50_us']:8} {r['ours_p99_us']:8} {r['ours_over_floor']:6} "
              f"{r['baseline_p50_us']:>8} {r['ours_over_baseline']:>6} {r['torch_p50_us']:>8} "
              f"{r['torch_over_ours']:>6} {r['over_fp32']:>6} {r['route']}")


if __name__ == "__main__":
    main()
