#!/usr/bin/env python3
"""The decode-shape table against the public selectors (tools/gpu-lab/decode-peers.sh):
per K, cache state and shape, our median beside the previous main's (the same
rows, the same call), each peer's, the fastest right peer, ours over it and the
target (0.8x that peer), from peer_bench.py's CSVs peers_k<K>_<l2>.csv and
base_k<K>_<l2>.csv (l2: warm, the rows just read; flush, L2 flushed: "cold").
A system whose checked rows were wrong is no peer (its time is kept, marked).
When the base run timed the peers too (decode-peers.sh interleaves them by
default, so both libraries run in the same company), `peer_drift` is the
fastest peer's median in the base run over its median in ours: how far the
two runs' conditions moved apart.

The prefill chunks and short rows (decode-peers.sh prefill) use the same table
with their own files (--prefix prefill --base-prefix prefillbase) and target
(--target 0.9: 0.9x the fastest peer).

usage: decode_peers_table.py --dir RAW --out-csv FILE [--prefix P] [--base-prefix B]
                             [--target X]
"""
import argparse
import csv
import glob
import os
import re

PEERS = ["hpcops", "vllm", "deepselect", "flashinfer"]
CACHE = {"warm": "warm", "flush": "cold"}


def load(path):
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for r in csv.DictReader(f):
            out[(int(r["m"]), int(r["n"]), r["system"])] = r
    return out


def median(rows, key):
    r = rows.get(key)
    if r is None or r["status"] not in ("ok", "OK") or not r.get("median_us"):
        return None
    return float(r["median_us"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out-csv", required=True)
    ap.add_argument("--prefix", default="peers", help="the runs' files: <prefix>_k<K>_<l2>.csv")
    ap.add_argument("--base-prefix", default="base", help="the previous main's files")
    ap.add_argument("--target", type=float, default=0.8, help="the target: this x the fastest peer")
    args = ap.parse_args()
    table = []
    for path in sorted(glob.glob(os.path.join(args.dir, f"{args.prefix}_k*_*.csv"))):
        k, l2 = re.match(rf"{args.prefix}_k(\d+)_(\w+)\.csv", os.path.basename(path)).groups()
        peers = load(path)
        base = load(os.path.join(args.dir, f"{args.base_prefix}_k{k}_{l2}.csv"))
        for m, n in sorted({(m, n) for m, n, _ in peers}):
            ours = median(peers, (m, n, "ours"))
            floor = float(peers[(m, n, "ours")]["floor_us"]) if (m, n, "ours") in peers else None
            row = {"k": int(k), "cache": CACHE.get(l2, l2), "m": m, "n": n, "floor_us": floor,
                   "ours_us": ours, "previous_main_us": median(base, (m, n, "ours")),
                   "ours_route": peers.get((m, n, "ours"), {}).get("route", "")}
            best = None
            for p in PEERS:
                t = median(peers, (m, n, p))
                row[f"{p}_us"] = t
                if t is not None and (best is None or t < best[1]):
                    best = (p, t)
            row["torch_us"] = median(peers, (m, n, "torch"))
            row["best_peer"] = best[0] if best else ""
            row["best_peer_us"] = best[1] if best else None
            row["ours_over_best"] = round(ours / best[1], 3) if best and ours else None
            row["target_us"] = round(args.target * best[1], 2) if best else None
            base_best = median(base, (m, n, best[0])) if best else None
            row["peer_drift"] = round(base_best / best[1], 3) if base_best else None
            row["met"] = bool(best and ours and ours <= args.target * best[1])
            if row["previous_main_us"] and ours:
                row["new_over_previous"] = round(ours / row["previous_main_us"], 3)
            table.append(row)
    fields = ["k", "cache", "m", "n", "floor_us", "ours_us", "previous_main_us", "new_over_previous"] + \
        [f"{p}_us" for p in PEERS] + ["torch_us", "best_peer", "best_peer_us", "ours_over_best",
                                      "target_us", "met", "peer_drift", "ours_route"]
    with open(args.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        for row in table:
            w.writerow({key: (round(v, 2) if isinstance(v, float) else v) for key, v in row.items()})
    print(f"{'K':>5} {'cache':>5} {'shape':>12} {'ours':>8} {'prev':>8} {'best peer':>18} {'ours/best':>9} met")
    for r in table:
        ours = f"{r['ours_us']:.1f}" if r["ours_us"] else "-"
        prev = f"{r['previous_main_us']:.1f}" if r["previous_main_us"] else "-"
        best = f"{r['best_peer']} {r['best_peer_us']:.1f}" if r["best_peer"] else "-"
        ratio = f"{r['ours_over_best']:.2f}" if r["ours_over_best"] else "-"
        print(f"{r['k']:>5} {r['cache']:>5} {r['m']:>5} x {r['n']:<6} {ours:>8} {prev:>8} {best:>18} {ratio:>9} "
              f"{'yes' if r['met'] else 'no'}")


if __name__ == "__main__":
    main()
