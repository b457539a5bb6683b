#!/usr/bin/env bash
# topk-cli and topk-loadgen against a real server process: select (generated
# rows, saved), replay of the saved file (streamed), info/stats/health, and
# both load modes with every answer verified; the loadgen's report (tail
# percentiles, errors by code, warm-up apart, metadata, files written per
# step), Poisson arrivals, --connections, .npy rows and TLS.
# Usage: tools_test.sh TOPK_SERVER TOPK_CLI TOPK_LOADGEN
set -euo pipefail
source "$(dirname "$0")/server_port.sh"
server=$1 cli=$2 loadgen=$3
work=$(mktemp -d)
"$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --max_rows=64 --max_width=65536 \
  --max_k=512 --log_level=debug >"$work/server.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
port=$(listened_port "$work/server.log")
t=--target=127.0.0.1:$port
set -x
[ "$("$cli" health $t)" = SERVING ]
"$cli" info $t | grep 'backend: "cpu"' >/dev/null
"$cli" select $t --rows=8 --width=30000 --k=100 --distribution=bf16_ties --lengths=random \
  --sorted --save="$work/rows.bin" --output="$work/indices.bin"
[ "$(stat -c %s "$work/indices.bin")" = $((8 * 100 * 4)) ]
"$cli" replay $t --input="$work/rows.bin" --k=100 --repeat=3 --stream --chunk_bytes=50000
! "$cli" select $t --rows=8 --width=100 --k=513 2>"$work/err.txt"
grep -q "INVALID_ARGUMENT" "$work/err.txt"
# 16-bit rows (verified in their type), streamed with chunks cut inside elements:
# call 0's line ends with its verdict.
"$cli" select $t --rows=8 --width=30000 --k=100 --distribution=bf16_ties --dtype=bf16 \
  --return_values --stream --chunk_bytes=1001 | grep -Eq "^ +0 .* yes$"
"$cli" select $t --rows=8 --width=30000 --k=100 --dtype=fp16 --sorted --deterministic
! "$cli" select $t --dtype=fp8 2>"$work/err.txt"
grep -q "unknown dtype 'fp8' (fp32, bf16, fp16)" "$work/err.txt"
"$loadgen" $t --rows=8 --width=20000 --k=64 --dtype=bf16 --concurrency=2 --duration_s=1 \
  --warmup_s=0.2 --verify_every=1 --progress=false | tee "$work/bf16.txt"
grep -q "(indexer, causal, bf16), k=64" "$work/bf16.txt"
awk '/^concurrency/ { if ($(NF-2) == 0 || $(NF-1) != 0 || $NF != 0) bad = 1; n++ }
     END { exit (n == 1 && !bad) ? 0 : 1 }' "$work/bf16.txt"
"$loadgen" $t --rows=8 --width=20000 --k=64 --concurrency=1,3 --duration_s=1 --warmup_s=0.2 \
  --verify_every=1 --progress=false --csv="$work/c.csv" --json="$work/c.json"
"$loadgen" $t --rows=8 --width=20000 --k=64 --request_rate=40 --duration_s=1 --warmup_s=0.2 \
  --verify_every=1 --progress=false --csv="$work/r.csv"
"$loadgen" $t --rows=4 --width=20000 --k=64 --request_rate=20 --stream --duration_s=1 \
  --warmup_s=0.2 --verify_every=1 --progress=false
[ "$(wc -l <"$work/c.csv")" = 3 ] && [ "$(wc -l <"$work/r.csv")" = 2 ]
grep -q '"mode": "concurrency"' "$work/c.json"
# The loadgen report: tail percentiles in order, warm-up calls counted apart
# (every measured answer verified, no warm-up one), the run's metadata.
python3 - "$work/c.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
meta = run["metadata"]
assert meta["server_backend"] == "cpu" and meta["connections"] == "3", meta
assert meta["started_utc"].endswith("Z") and "--concurrency=1,3" in meta["command_line"], meta
for s in run["steps"]:
    assert 0 < s["p50_us"] <= s["p95_us"] <= s["p99_us"] <= s["p999_us"] <= s["max_us"], s
    assert s["warmup_calls"] > 0 and s["verified"] == s["requests"] > 0, s
    assert s["errors"] == 0 and s["errors_by_code"] == {}, s
PY
# Errors by status code: every measured call refused (k above --max_k), none
# of the warm-up ones counted; exit status 1.
! "$loadgen" $t --rows=2 --width=2000 --k=513 --concurrency=2 --duration_s=0.5 --warmup_s=0.3 \
  --progress=false --json="$work/e.json" >/dev/null 2>&1
python3 - "$work/e.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
assert s["errors"] > 0 and s["errors_by_code"] == {"INVALID_ARGUMENT": s["errors"]}, s
assert s["warmup_calls"] > 0 and s["requests"] == 0, s
PY
# Poisson arrivals: gaps vary about as much as their mean (a constant
# schedule's hardly at all). Progress into a file: lines, no carriage returns.
# Measured on the actual send times: a sender starved by a loaded machine (CI
# runs suites side by side) makes any schedule's gaps uneven, the constant
# one's and, beyond a Poisson cv, the Poisson one's. Run one after the other,
# the two could see different load (an unstarved constant run, then a starved
# Poisson run read as "too bursty"). So both run at once, the constant one the
# control over the same interval, and a pair in which either shows starvation
# is measured again, up to four times; only an unstarved pair decides.
arrivals_ok=0
for attempt in 1 2 3 4; do
  runs=()
  for arrivals in constant poisson; do
    "$loadgen" $t --rows=2 --width=2000 --k=16 --request_rate=300 --arrivals=$arrivals \
      --duration_s=1.5 --warmup_s=0.2 --json="$work/$arrivals.json" >/dev/null \
      2>"$work/$arrivals.progress" &
    runs+=($!)
  done
  wait "${runs[0]}"
  wait "${runs[1]}"
  # (`! cmd` would not stop the script: set -e ignores a negated command.)
  if grep -q $'\r' "$work/constant.progress" "$work/poisson.progress"; then
    echo "progress into a file has carriage returns" >&2
    exit 1
  fi
  verdict=$(python3 - "$work/constant.json" "$work/poisson.json" <<'PY'
import json, sys
constant, poisson = (json.load(open(p))["steps"][0] for p in sys.argv[1:])
assert poisson["requests"] > 200 and poisson["errors"] == 0, poisson
cv_constant, cv_poisson = constant["arrival_cv"], poisson["arrival_cv"]
if cv_constant >= 0.6 or cv_poisson >= 1.6:
    print("starved", cv_constant, cv_poisson)  # a schedule was not kept: measure again
elif max(0.6, cv_constant + 0.3) < cv_poisson:
    print("ok")
else:
    print("wrong", constant, poisson)
PY
)
  [ "$verdict" = ok ] && { arrivals_ok=1; break; }
  case "$verdict" in starved*) ;; *) echo "arrivals: $verdict" >&2; exit 1 ;; esac
done
[ "$arrivals_ok" = 1 ] || { echo "arrivals: starved in every attempt ($verdict)" >&2; exit 1; }
# --connections: that many TCP connections to the server, however many callers.
"$loadgen" $t --rows=2 --width=2000 --k=16 --concurrency=6 --connections=3 --duration_s=4 \
  --warmup_s=0.2 --progress=false >/dev/null &
loadgen_pid=$!
# Polled while the run lasts (a busy machine may take a while to connect): the
# most established connections seen at once.
connections=$(python3 - "$port" <<'PY'
import sys, time
port = "%04X" % int(sys.argv[1])
def established():
    # /proc/net/tcp{,6}: remote address ip:port in hex, state 01 = established
    # (a dual-stack server's IPv4 peers are in tcp6).
    return sum(1 for table in ("/proc/net/tcp", "/proc/net/tcp6")
               for line in open(table).readlines()[1:]
               if line.split()[2].endswith(":" + port) and line.split()[3] == "01")
most, deadline = 0, time.monotonic() + 10
# (An exited loadgen stays in /proc as a zombie until waited for: the deadline
# bounds the poll.)
while time.monotonic() < deadline and most < 3:
    most = max(most, established())
    time.sleep(0.05)
print(most)
PY
)
wait $loadgen_pid
[ "$connections" = 3 ]
# Real rows from .npy files (np.save, padded with lengths): every answer exact,
# the score bytes those of the valid prefixes.
python3 - "$work" <<'PY'
import random, struct, sys
def save(path, descr, shape, packed):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + packed)
random.seed(5)
rows, width = 4, 3000
scores = [random.gauss(0, 1) for _ in range(rows * width)]
save(sys.argv[1] + "/rows.npy", "<f4", (rows, width), struct.pack("<%df" % len(scores), *scores))
save(sys.argv[1] + "/lengths.npy", "<i8", (rows,), struct.pack("<4q", 3000, 17, 0, 2500))
PY
"$loadgen" $t --npy="$work/rows.npy,$work/rows.npy" --npy_lengths="$work/lengths.npy," --k=64 \
  --concurrency=2 --duration_s=0.5 --warmup_s=0.1 --verify_every=1 --progress=false \
  --json="$work/npy.json" | grep -q "2 .npy requests"
python3 - "$work/npy.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
assert s["verified"] == s["requests"] > 0 and s["inexact"] == 0 and s["errors"] == 0, s
assert s["rows"] == 4 * s["requests"], s
# Each caller alternates the padded file (5517 valid scores) and the full one
# (12000): n requests hold `full` full ones, with n - 2 full within one per caller.
n = s["requests"]
full, rest = divmod(s["score_bytes"] // 4 - 5517 * n, 12000 - 5517)
assert s["score_bytes"] % 4 == 0 and rest == 0 and abs(n - 2 * full) <= 2, s
PY
# CSV and JSON are written as each step ends: a step is on disk while the
# sweep still runs. Seen by a poller started (and running) before the sweep:
# a reader started after the first step (a forked sleep per poll, then a fresh
# python3) can land after the second one on a loaded machine. A file holding 1
# or 2 of the 3 steps can only have been read while the sweep ran.
python3 - "$work" <<'PY' &
import json, os, sys, time
work = sys.argv[1]
open(work + "/poller.ready", "w").close()
seen_json, seen_csv = set(), set()
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not (3 in seen_json and 3 in seen_csv):
    if os.path.exists(work + "/steps.json"):  # both are renamed into place whole
        seen_json.add(len(json.load(open(work + "/steps.json"))["steps"]))
    if os.path.exists(work + "/steps.csv"):
        seen_csv.add(sum(1 for _ in open(work + "/steps.csv")) - 1)  # less the header
    time.sleep(0.01)
assert seen_json & {1, 2} and 3 in seen_json, seen_json
assert seen_csv & {1, 2} and 3 in seen_csv, seen_csv
PY
poller_pid=$!
for _ in $(seq 300); do [ -e "$work/poller.ready" ] && break; sleep 0.1; done
"$loadgen" $t --rows=2 --width=2000 --k=16 --concurrency=1,1,1 --duration_s=1.5 --warmup_s=0.1 \
  --progress=false --json="$work/steps.json" --csv="$work/steps.csv" >/dev/null
wait $poller_pid
[ "$(wc -l <"$work/steps.csv")" = 4 ]
# Mutual TLS: a second server with a self-signed certificate that is also the
# one root client certificates must chain to (--tls_client_ca); the loadgen and
# the CLI reach it with --tls_ca / --tls_roots and that certificate as their
# own, and fail without TLS or without a client certificate.
if openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$work/key.pem" \
  -out "$work/cert.pem" >/dev/null 2>&1; then
  "$server" --listen=127.0.0.1:0 --metrics_listen= --backend=cpu --max_rows=64 \
    --max_width=65536 --max_k=512 --tls_cert="$work/cert.pem" --tls_key="$work/key.pem" \
    --tls_client_ca="$work/cert.pem" >"$work/tls.log" 2>&1 &
  tls_pid=$!
  tls_port=$(listened_port "$work/tls.log")
  mtls="--tls_cert=$work/cert.pem --tls_key=$work/key.pem --tls_server_name=localhost"
  "$loadgen" --target=127.0.0.1:$tls_port --tls_ca="$work/cert.pem" $mtls \
    --rows=2 --width=2000 --k=16 --concurrency=2 --duration_s=0.5 --warmup_s=0.1 \
    --verify_every=1 --progress=false --json="$work/tls.json" >/dev/null
  grep -q '"tls": "true"' "$work/tls.json"
  grep -q '"tls_client_certificate": "true"' "$work/tls.json"
  [ "$("$cli" health --target=127.0.0.1:$tls_port --tls_roots="$work/cert.pem" $mtls)" = SERVING ]
  ! "$cli" health --target=127.0.0.1:$tls_port --tls_roots="$work/cert.pem" \
    --tls_server_name=localhost >/dev/null 2>&1
  ! "$loadgen" --target=127.0.0.1:$tls_port --tls_ca="$work/cert.pem" --tls_server_name=localhost \
    --wait_for_serving_s=1 --rows=2 --width=2000 --k=16 --concurrency=1 --duration_s=0.5 \
    --warmup_s=0.1 --progress=false >/dev/null 2>&1
  ! "$loadgen" --target=127.0.0.1:$tls_port --wait_for_serving_s=1 --rows=2 --width=2000 --k=16 \
    --concurrency=1 --duration_s=0.5 --warmup_s=0.1 --progress=false >/dev/null 2>"$work/err.txt"
  grep -q "SERVING" "$work/err.txt"
  kill -TERM $tls_pid
  wait $tls_pid
else
  echo "no openssl CLI: the TLS step is skipped"
fi
"$cli" stats $t | grep "requests:" >/dev/null
"$cli" stats $t | grep -E "^total +[0-9]+" >/dev/null
"$cli" stats $t --json | python3 -c 'import json, sys; s = json.load(sys.stdin); assert s["requests"] > 0 and s["latency"]["total"]["p99_us"] > 0, s'
# Help per command, and the valid choices in errors.
"$cli" help select | grep -q -- "--distribution"
"$cli" replay --help | grep -q -- "--repeat"
if "$cli" help select | grep -q -- "--prometheus"; then
  echo "help select lists another command's flag" >&2
  exit 1
fi
! "$cli" bogus $t 2>"$work/err.txt"
grep -q "select, replay, info, stats, health" "$work/err.txt"
! "$cli" select $t --distribution=nope 2>"$work/err.txt"
grep -q "bf16_ties" "$work/err.txt"
"$cli" stats $t --prometheus | grep '^topk_requests_total' >/dev/null
# The server's log: the startup summary, one line per request at debug, and
# failures with their cause.
grep -q "limits: max_k 512, max_rows 64" "$work/server.log"
grep -q "memory at start:" "$work/server.log"
grep -Eq "select ok: 8 rows, k = 100, [0-9]+ us" "$work/server.log"
grep -q "failed: INVALID_ARGUMENT: k = 513 is out of range" "$work/server.log"
