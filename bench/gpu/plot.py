#!/usr/bin/env python3
"""Merges topk-bench-gpu's CSV with torch_baseline.py's, prints the summary
table (ours vs floor vs torch.topk vs our exact route) and the geomeans, and
plots latency vs M per N (like the paper's Figure 7)."""
import argparse
import csv
import math


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--torch", required=True)
    ap.add_argument("--out-csv", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("--baseline", default="",
                    help="topk-bench-gpu CSV of another build on the same shapes (A/B)")
    args = ap.parse_args()
    ours = {(int(r["M"]), int(r["N"])): r for r in csv.DictReader(open(args.ours))}
    torch_rows = {}
    try:
        torch_rows = {(int(r["M"]), int(r["N"])): r for r in csv.DictReader(open(args.torch))}
    except FileNotFoundError:
        pass
    baseline = {}
    if args.baseline:
        baseline = {(int(r["M"]), int(r["N"])): r for r in csv.DictReader(open(args.baseline))}
    merged = []
    for key in sorted(ours, key=lambda t: (t[1], t[0])):
        r = dict(ours[key])
        t = torch_rows.get(key)
        r["torch_ms"] = t["torch_ms"] if t else ""
        if args.baseline:
            b = baseline.get(key)
            r["baseline_ms"] = b["ours_ms"] if b else ""
            r["baseline_floor_ms"] = b["floor_ms"] if b else ""
        merged.append(r)
    with open(args.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(merged[0].keys()))
        w.writeheader()
        w.writerows(merged)
    print(f"{'M':>5} {'N':>8} {'route':>18} {'ours':>8} {'floor':>8} {'x floor':>7} "
          f"{'exact':>8} {'torch':>8} {'vs torch':>8} {'vs exact':>8} {'band':>6} {'recov':>6} bad")
    g_torch, g_exact, matrix = [], [], []
    for r in merged:
        m, n = int(r["M"]), int(r["N"])
        ours_ms, floor_ms, exact_ms = float(r["ours_ms"]), float(r["floor_ms"]), float(r["exact_ms"])
        torch_ms = float(r["torch_ms"]) if r["torch_ms"] else float("nan")
        in_matrix = m >= 512
        if in_matrix:
            matrix.append(ours_ms / floor_ms)
            if not math.isnan(torch_ms):
                g_torch.append(torch_ms / ours_ms)
            if exact_ms > 0:  # 0: not timed (--exact=false)
                g_exact.append(exact_ms / ours_ms)
        print(f"{m:5d} {n:8d} {r['route']:>18} {ours_ms:8.4f} {floor_ms:8.4f} "
              f"{ours_ms / floor_ms:7.2f} {exact_ms:8.4f} {torch_ms:8.4f} "
              f"{torch_ms / ours_ms:8.2f} {exact_ms / ours_ms:8.2f} "
              f"{float(r['band_rate']):6.3f} {float(r['exact_rate']):6.3f} {r['bad_rows']}")

    def gm(v):
        return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")

    print(f"# 20-shape matrix: geomean speedup vs torch.topk {gm(g_torch):.2f}x, "
          f"vs our exact route {gm(g_exact):.2f}x, geomean fraction of floor {gm(matrix):.3f}")
    ab_table(merged, gm)
    baseline_table(merged, gm)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# matplotlib missing: no plot")
        return
    ns = sorted({int(r["N"]) for r in merged})
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 3.6), squeeze=False)
    for ax, n in zip(axes[0], ns):
        rs = sorted([r for r in merged if int(r["N"]) == n], key=lambda r: int(r["M"]))
        ms = [int(r["M"]) for r in rs]
        for col, label, style in (("ours_ms", "ours (sampled)", "o-"),
                                  ("exact_ms", "ours, sampling off", "s--"),
                                  ("torch_ms", "torch.topk", "^-"),
                                  ("floor_ms", "one-scan floor", "k:")):
            ys = [float(r[col]) if r[col] else float("nan") for r in rs]
            ax.plot(ms, ys, style, label=label, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"N = {n // 1024}K, K = 2048")
        ax.set_xlabel("rows M")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("latency (ms)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print(f"# wrote {args.png}")


def baseline_table(merged, gm):
    """Another build's binary on the same shapes in the same run: per shape
    (with the new build's p99) and as geomeans over the M >= 512 matrix, each
    build's time against its own floor measurement, and new over baseline."""
    rows = [r for r in merged if r.get("baseline_ms")]
    if not rows:
        return
    print(f"{'M':>5} {'N':>8} {'new':>8} {'p99':>8} {'x fl':>5} {'baseline':>8} {'x fl':>5} "
          f"{'new/base':>8}")
    g_n, g_b, g_r = [], [], []
    for r in rows:
        o, f = float(r["ours_ms"]), float(r["floor_ms"])
        p99 = float(r.get("ours_p99_ms") or "nan")
        b, bf = float(r["baseline_ms"]), float(r["baseline_floor_ms"])
        g_n.append(o / f)
        g_b.append(b / bf)
        g_r.append(o / b)
        print(f"{int(r['M']):5d} {int(r['N']):8d} {o:8.4f} {p99:8.4f} {o / f:5.2f} {b:8.4f} "
              f"{b / bf:5.2f} {o / b:8.3f}")
    big = [i for i, r in enumerate(rows) if int(r["M"]) >= 512]
    sel = lambda v: [v[i] for i in big]
    print(f"# baseline A/B over the {len(big)} matrix shapes (M >= 512): new "
          f"{gm(sel(g_n)):.3f}x floor, baseline {gm(sel(g_b)):.3f}x floor, new/baseline "
          f"{gm(sel(g_r)):.3f}")


def ab_table(merged, gm):
    """The kernel-variant A/B (topk-bench-gpu --alt-ctas-per-sm): both
    variants, floor and torch.topk per matrix shape, with geomeans."""
    rows = [r for r in merged if int(r["M"]) >= 512 and float(r.get("alt_ms") or 0) > 0]
    if not rows:
        return
    print(f"{'M':>5} {'N':>8} {'blk':>4} {'ours':>8} {'x fl':>5} {'blk':>4} {'alt':>8} "
          f"{'x fl':>5} {'alt/ours':>8} {'floor':>8} {'torch':>8} {'best/torch':>10}")
    g_o, g_a, g_r, g_t = [], [], [], []
    for r in rows:
        o, a, f = float(r["ours_ms"]), float(r["alt_ms"]), float(r["floor_ms"])
        t = float(r["torch_ms"]) if r["torch_ms"] else float("nan")
        g_o.append(o / f)
        g_a.append(a / f)
        g_r.append(a / o)
        if not math.isnan(t):
            g_t.append(t / min(o, a))
        print(f"{int(r['M']):5d} {int(r['N']):8d} {r['block']:>4} {o:8.4f} {o / f:5.2f} "
              f"{r['alt_block']:>4} {a:8.4f} {a / f:5.2f} {a / o:8.3f} {f:8.4f} {t:8.4f} "
              f"{t / min(o, a):10.2f}")
    print(f"# A/B geomeans over {len(rows)} shapes: ours {gm(g_o):.3f}x floor, alt "
          f"{gm(g_a):.3f}x floor, alt/ours {gm(g_r):.3f}, torch/best {gm(g_t):.2f}x")


if __name__ == "__main__":
    main()
