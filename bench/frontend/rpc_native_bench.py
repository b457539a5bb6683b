#!/usr/bin/env python3
"""The Python RPC path against the C++ load generator (issue 20, item 2):
ZeroCopyClient.select by reference and TopKClient.select inline, each over
grpcio and over the native core (libtopk_client_c.so), beside topk-loadgen on
the same server, the same rows and the same run, interleaved round by round,
one caller at a time. Every answer is checked for exactness (the loadgen's
with --verify_every=1; ours against thresholds computed once per shape).

Here (CPU backend, rows in POSIX shared memory):

    PYTHONPATH=build-cpu/python /usr/bin/python3 bench/frontend/rpc_native_bench.py \\
        --bin=build-cpu --out=/tmp/rpc-native

On a GPU machine (CUDA backend, rows in torch CUDA tensors over CUDA IPC;
the loadgen with --transport=ipc, which needs its CUDA build):

    PYTHONPATH=ROOT/python python3 bench/frontend/rpc_native_bench.py \\
        --bin=ROOT --transport=ipc --out=OUT

--bin: a build folder (server/topk-server, client/tools/topk-loadgen) or a
packed tree (bin/topk-server, bin/topk-loadgen). Prints a table of p50 / p99
per path and shape with the ratio to the loadgen's p50, and writes it as CSV
(OUT/rpc_native.csv) with every round's figures (OUT/rpc_native_rounds.csv).
Exit status 1 when an answer was inexact or a path failed.
"""

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

from topk_client import TopKClient, ZeroCopyClient


def find_binary(root: str, name: str) -> str:
    for sub in ("server", "client/tools", "bin"):
        path = os.path.join(root, sub, name)
        if os.access(path, os.X_OK):
            return path
    raise SystemExit(f"{name} not found under {root} (server/, client/tools/ or bin/)")


def causal_rows(m: int, n: int, seed: int):
    """Rows (M, N) float32 and causal lengths: row r is N - (M - 1 - r) long
    (the last rows of a prefill chunk; a decode step's rows for M = 1)."""
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((m, n), dtype=np.float32)
    lengths = np.array([max(1, n - (m - 1 - r)) for r in range(m)], dtype=np.int32)
    return rows, lengths


class Verifier:
    """Exactness with ties, per row: min(K, L) distinct in-range indices
    then -1; every chosen score >= the row's K-th largest (computed once per
    shape), and as many chosen above it as the row holds. That count is
    taken from the whole valid row after every call: like the loadgen's
    verifier, the check reads every score the server read, which leaves the
    rows as warm for the next call on both sides (on the build VM, whether
    the client reads the row between calls moves a 1 x 128K call by 20-150
    us)."""

    def __init__(self, rows: np.ndarray, lengths: np.ndarray, k: int):
        self.rows, self.lengths, self.k = rows, lengths, k
        self.kth = []
        for r in range(rows.shape[0]):
            valid = rows[r, :lengths[r]]
            want = min(k, valid.size)
            self.kth.append(np.partition(valid, valid.size - want)[valid.size - want]
                            if want else 0)

    def exact(self, indices: np.ndarray) -> bool:
        if indices.shape[0] != self.rows.shape[0] or indices.shape[1] < self.k:
            return False
        for r in range(self.rows.shape[0]):
            length = int(self.lengths[r])
            want = min(self.k, length)
            got = indices[r, :self.k]
            chosen = got[:want]
            if np.any(got[want:] != -1) or np.any(chosen < 0) or np.any(chosen >= length):
                return False
            if np.unique(chosen).size != want:
                return False
            if want:
                picked = self.rows[r, chosen]
                above = np.count_nonzero(self.rows[r, :length] > self.kth[r])
                if picked.min() < self.kth[r] or np.count_nonzero(picked > self.kth[r]) != above:
                    return False
        return True


STAGES = ("prepare", "queue", "device", "total")


class ServerStages:
    """The server's own time per call by stage (topk_latency_seconds, from
    its metrics endpoint): the mean over the calls between two scrapes, so a
    path's extra latency can be placed on the server or outside it (the wire
    and the client). Empty when the bench runs without --metrics_port."""

    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/metrics" if port else ""
        self.last = self._scrape()

    # One line per stage and kind of the Prometheus text format, e.g.
    # topk_latency_seconds_sum{stage="device"} 0.0123
    _LINE = re.compile(r'^topk_latency_seconds_(sum|count)\{stage="(\w+)"\} (\S+)$')

    def _scrape(self):
        """{(stage, "sum" | "count"): value} as the server reports it now."""
        if not self.url:
            return {}
        import urllib.request
        with urllib.request.urlopen(self.url, timeout=5) as reply:
            text = reply.read().decode()
        return {(m[2], m[1]): float(m[3])
                for m in map(self._LINE.match, text.splitlines()) if m}

    def since_last(self):
        """{srv_<stage>_us: mean} over the calls since the previous call."""
        if not self.url:
            return {}
        now, before = self._scrape(), self.last
        self.last = now
        means = {}
        for stage in STAGES:
            calls = now.get((stage, "count"), 0) - before.get((stage, "count"), 0)
            seconds = now.get((stage, "sum"), 0) - before.get((stage, "sum"), 0)
            means[f"srv_{stage}_us"] = round(1e6 * seconds / calls, 1) if calls else ""
        return means


def percentile(samples, q):
    return float(np.percentile(np.asarray(samples), q)) if samples else float("nan")


def run_loadgen(loadgen, target, transport, npy, npy_lengths, k, seconds, out_csv):
    """One loadgen step (concurrency 1, every answer verified): p50, p99 us."""
    command = [loadgen, f"--target={target}", f"--transport={transport}", f"--npy={npy}",
               f"--npy_lengths={npy_lengths}", f"--k={k}", "--concurrency=1",
               f"--duration_s={seconds}", "--warmup_s=0.5", "--verify_every=1",
               f"--csv={out_csv}", "--progress=false"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"topk-loadgen failed ({done.returncode}): {done.stderr[-2000:]}")
    with open(out_csv) as f:
        step = list(csv.DictReader(f))[-1]
    if int(step["inexact"]) or int(step["errors"]):
        raise RuntimeError(f"topk-loadgen: {step['inexact']} inexact, {step['errors']} errors")
    return float(step["p50_us"]), float(step["p99_us"]), int(step["requests"])


def timed_calls(call, check, seconds, min_calls, warmup):
    """Latencies (us) of back-to-back calls for `seconds` (at least
    min_calls), each answer checked outside the timed part."""
    for _ in range(warmup):
        if not check(call()):
            raise RuntimeError("inexact answer in warm-up")
    samples, inexact = [], 0
    deadline = time.monotonic() + seconds
    while len(samples) < min_calls or time.monotonic() < deadline:
        start = time.perf_counter_ns()
        answer = call()
        samples.append((time.perf_counter_ns() - start) / 1e3)
        inexact += 0 if check(answer) else 1
    return samples, inexact


class ShmPaths:
    """By-reference calls on numpy rows in the session's shared memory."""

    def __init__(self, target, rows, lengths, k, native):
        self.client = ZeroCopyClient(target, native=native)
        assert self.client.native == native, "native core asked for but not in use"
        m, n = rows.shape
        self.scores = self.client.shared_array((m, n), np.float32)
        self.scores[:] = rows
        self.out = self.client.shared_array((m, k), np.int32)
        self.lengths, self.k = lengths, k

    def call(self):
        self.out[:] = -7  # an answer not written would fail the check
        start = time.perf_counter_ns()
        self.client.select(self.scores, self.lengths, self.k, out=self.out)
        return self.out, start

    def close(self):
        self.client.close()


class IpcPaths:
    """By-reference calls on torch CUDA tensors (CUDA IPC regions)."""

    def __init__(self, target, rows, lengths, k, native, ordering, reset, device_lengths):
        import torch
        self.torch = torch
        self.client = ZeroCopyClient(target, native=native)
        assert self.client.native == native, "native core asked for but not in use"
        self.scores = torch.from_numpy(rows).cuda()
        self.out = torch.empty((rows.shape[0], k), dtype=torch.int32, device="cuda")
        # The loadgen's lengths are in its IPC region (read on the server's
        # GPU); --lengths=device does the same, inline sends them in the request.
        if device_lengths:
            lengths = torch.from_numpy(lengths).cuda()
        self.lengths, self.k, self.ordering, self.reset = lengths, k, ordering, reset
        self.stream = torch.cuda.current_stream()

    def call(self):
        # The reset is a kernel of this process's own: without MPS the GPU
        # switches to this context and back for it, which the loadgen (one
        # copy back per call, no reset) does not pay. --reset_output=0 makes
        # the same one operation per call (a call that wrote nothing then
        # passes on the previous call's answer, as the loadgen's would).
        if self.reset:
            self.out.fill_(-7)
        self.stream.synchronize()
        start = time.perf_counter_ns()
        self.client.select(self.scores, self.lengths, self.k, out=self.out,
                           ordering=self.ordering)
        self.stream.synchronize()  # the answer is complete, as the loadgen's is
        return self.out, start

    def close(self):
        self.client.close()


def measure_ref(paths, verifier, seconds, min_calls, to_host):
    """As timed_calls, for by-reference paths: each call's clock starts
    after its output was reset (paths.call says when)."""
    call = paths.call
    samples, inexact = [], 0
    for _ in range(3):  # warm-up: connections, registrations, caches
        out, _ = call()
        if not verifier.exact(to_host(out)):
            raise RuntimeError("inexact answer in warm-up")
    deadline = time.monotonic() + seconds
    while len(samples) < min_calls or time.monotonic() < deadline:
        out, start = call()
        samples.append((time.perf_counter_ns() - start) / 1e3)
        inexact += 0 if verifier.exact(to_host(out)) else 1
    return samples, inexact


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="build folder or packed tree")
    parser.add_argument("--out", required=True, help="folder for the CSVs and the server log")
    parser.add_argument("--transport", choices=("shm", "ipc"), default="shm")
    parser.add_argument("--shapes", default="1x131072,8x1048576,64x131072")
    parser.add_argument("--inline_shape", default="64x131072", help="'' skips the inline part")
    parser.add_argument("--k", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per path, shape and round")
    parser.add_argument("--min_calls", type=int, default=20)
    parser.add_argument("--ordering", choices=("host", "event"), default="host",
                        help="ipc: ZeroCopyClient.select's ordering")
    parser.add_argument("--metrics_port", type=int, default=0,
                        help="serve the server's metrics there and report its time per call by "
                             "stage for each path (srv_*_us); 0: off")
    parser.add_argument("--lengths", choices=("inline", "device"), default="inline",
                        help="ipc: lengths in the request or in a CUDA tensor (as the loadgen's)")
    parser.add_argument("--reset_output", type=int, choices=(0, 1), default=1,
                        help="ipc: fill the output with -7 on the GPU before each call")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    server_bin = find_binary(args.bin, "topk-server")
    loadgen = find_binary(args.bin, "topk-loadgen")
    work = tempfile.mkdtemp(prefix="rpc-native-")
    socket = os.path.join(work, "topk.sock")
    target = f"unix:{socket}"
    backend = "cpu" if args.transport == "shm" else "cuda"
    log = open(os.path.join(args.out, "server.log"), "w")
    metrics = f"127.0.0.1:{args.metrics_port}" if args.metrics_port else ""
    server = subprocess.Popen([server_bin, f"--listen={target}", f"--metrics_listen={metrics}",
                               f"--backend={backend}", "--enable_regions",
                               f"--max_k={args.k}"], stdout=log, stderr=subprocess.STDOUT)
    rounds_rows, failed = [], False
    try:
        with TopKClient(target, native=False) as probe:
            probe.wait_for_serving(60)
        if args.transport == "ipc":
            __import__("torch")  # the ipc paths need it: fail before any work
        stages = ServerStages(args.metrics_port)
        shapes = [("ref", s) for s in args.shapes.split(",") if s]
        if args.inline_shape:
            shapes.append(("inline", args.inline_shape))
        data = {}
        for kind, shape in shapes:
            m, n = (int(x) for x in shape.split("x"))
            rows, lengths = causal_rows(m, n, seed=m * 31 + n)
            npy, npy_lengths = os.path.join(work, f"{shape}.npy"), os.path.join(
                work, f"{shape}_lengths.npy")
            np.save(npy, rows)
            np.save(npy_lengths, lengths)
            data[(kind, shape)] = (rows, lengths, npy, npy_lengths,
                                   Verifier(rows, lengths, args.k))
        for round_index in range(args.rounds):
            for kind, shape in shapes:
                rows, lengths, npy, npy_lengths, verifier = data[(kind, shape)]
                transport = args.transport if kind == "ref" else "inline"
                p50, p99, calls = run_loadgen(
                    loadgen, target, transport, npy, npy_lengths, args.k, args.seconds,
                    os.path.join(work, "loadgen.csv"))
                rounds_rows.append(dict(round=round_index, kind=kind, shape=shape,
                                        path="topk-loadgen (C++)", calls=calls, p50_us=p50,
                                        p99_us=p99, inexact=0, **stages.since_last()))
                # Alternate which Python path goes first, round by round.
                order = (False, True) if round_index % 2 == 0 else (True, False)
                for native in order:
                    name = ("native core" if native else "grpcio")
                    try:
                        samples, inexact = run_python(kind, args, target, rows, lengths,
                                                      native, verifier)
                    except Exception as e:  # a path that fails is reported, the rest go on
                        print(f"{kind} {shape} {name}: FAILED: {e}", file=sys.stderr)
                        failed = True
                        stages.since_last()
                        continue
                    failed |= inexact > 0
                    rounds_rows.append(dict(round=round_index, kind=kind, shape=shape,
                                            path=f"python {name}", calls=len(samples),
                                            p50_us=percentile(samples, 50),
                                            p99_us=percentile(samples, 99), inexact=inexact,
                                            **stages.since_last()))
                print(f"round {round_index + 1}/{args.rounds} {kind} {shape} done",
                      file=sys.stderr)
    finally:
        server.terminate()
        server.wait(30)
        log.close()
    report(rounds_rows, args)
    return 1 if failed else 0


def run_python(kind, args, target, rows, lengths, native, verifier):
    if kind == "inline":
        client = TopKClient(target, native=native)
        assert client.native == native, "native core asked for but not in use"
        try:
            return timed_calls(lambda: client.select(rows, args.k, lengths=lengths).indices,
                               verifier.exact, args.seconds, args.min_calls, warmup=2)
        finally:
            client.close()
    if args.transport == "shm":
        paths = ShmPaths(target, rows, lengths, args.k, native)
        to_host = np.asarray
    else:
        paths = IpcPaths(target, rows, lengths, args.k, native, args.ordering,
                         args.reset_output, args.lengths == "device")
        to_host = lambda t: t.cpu().numpy()  # noqa: E731
    try:
        return measure_ref(paths, verifier, args.seconds, args.min_calls, to_host)
    finally:
        paths.close()


def report(rounds_rows, args):
    """Per shape and path: the median over rounds of each round's p50 and
    p99, and the ratio of the p50 to the loadgen's."""
    with open(os.path.join(args.out, "rpc_native_rounds.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rounds_rows[0]) if rounds_rows else ["round"])
        writer.writeheader()
        writer.writerows(rounds_rows)
    table, keys = [], []
    for row in rounds_rows:
        key = (row["kind"], row["shape"], row["path"])
        if key not in keys:
            keys.append(key)
    for kind, shape, path in keys:
        mine = [r for r in rounds_rows if (r["kind"], r["shape"], r["path"]) == (kind, shape, path)]
        base = [r for r in rounds_rows if (r["kind"], r["shape"]) == (kind, shape)
                and r["path"].startswith("topk-loadgen")]
        p50 = float(np.median([r["p50_us"] for r in mine]))
        p99 = float(np.median([r["p99_us"] for r in mine]))
        base_p50 = float(np.median([r["p50_us"] for r in base])) if base else float("nan")
        table.append(dict(transport=args.transport if kind == "ref" else "inline", shape=shape,
                          k=args.k, path=path, rounds=len(mine),
                          calls=sum(r["calls"] for r in mine), p50_us=round(p50, 1),
                          p99_us=round(p99, 1), x_loadgen_p50=round(p50 / base_p50, 3),
                          inexact=sum(r["inexact"] for r in mine),
                          **{f"srv_{st}_us": round(float(np.median(
                              [r[f"srv_{st}_us"] for r in mine])), 1)
                             for st in STAGES if all(r.get(f"srv_{st}_us") not in (None, "")
                                                     for r in mine)}))
    with open(os.path.join(args.out, "rpc_native.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]) if table else ["shape"])
        writer.writeheader()
        writer.writerows(table)
    print(f"{'transport':9} {'shape':11} {'path':20} {'calls':>6} {'p50 us':>10} {'p99 us':>10} "
          f"{'x loadgen':>9} inexact")
    for t in table:
        print(f"{t['transport']:9} {t['shape']:11} {t['path']:20} {t['calls']:>6} "
              f"{t['p50_us']:>10.1f} {t['p99_us']:>10.1f} {t['x_loadgen_p50']:>9.2f} "
              f"{t['inexact']}" + "".join(f" srv_{st} {t[f'srv_{st}_us']}" for st in STAGES
                                          if f"srv_{st}_us" in t))
    print(f"CSV: {os.path.join(args.out, 'rpc_native.csv')} (rounds: rpc_native_rounds.csv)")


if __name__ == "__main__":
    sys.exit(main())
