#!/usr/bin/env bash
# topk-loadgen --transport=shm against a real server process on a unix
# socket (alongside TCP): rows and answers by reference through a shared-
# memory region, every answer read back and verified, on a SelectPipeline per
# caller and with unary calls; the region is gone from /dev/shm afterwards.
# And --transport=shm against a server without --enable_regions fails with
# the flag's name; an unknown --call is refused. --call=echo: every Echo
# answered and compared, refused by a server without --enable_echo.
# --row_layout=pitch: verified, refused for uneven rows. --ipc_device=0,3
# (with shm: a segment per entry): callers spread over both, every answer
# verified, each group reported with its own share; a repeated entry refused.
# --transport=channel-shm: every answer through a channel verified, its segment gone after.
# Usage: loadgen_transport_test.sh TOPK_SERVER TOPK_LOADGEN
set -euo pipefail
server=$1 loadgen=$2
work=$(mktemp -d)
sock="$work/topk.sock"
"$server" --listen="127.0.0.1:0,unix:$sock" --metrics_listen= --backend=cpu --enable_regions --enable_echo \
  --max_rows=64 --max_width=65536 --max_k=512 >"$work/server.log" 2>&1 &
pid=$!
"$server" --listen="unix:$sock.off" --metrics_listen= --backend=cpu >"$work/off.log" 2>&1 &
off=$!
trap 'kill -TERM $pid $off 2>/dev/null; wait $pid $off 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && [ -S "$sock.off" ] && break; sleep 0.1; done
[ -S "$sock" ] || { cat "$work/server.log"; exit 1; }
set -x
for call in pipeline unary; do
  "$loadgen" --target="unix:$sock" --transport=shm --call=$call --rows=8 --width=20000 --k=64 \
    --concurrency=1,3 --duration_s=1 --warmup_s=0.2 --verify_every=1 --progress=false \
    --csv="$work/shm.csv" --json="$work/shm.json" | tee "$work/out.txt"
  # Every measured call verified, none inexact, no errors (last three columns).
  awk '/^concurrency/ { if ($(NF-2) == 0 || $(NF-1) != 0 || $NF != 0) bad = 1; n++ }
       END { exit (n == 2 && !bad) ? 0 : 1 }' "$work/out.txt"
  # The server's prepare time (decode and region binding) is reported, and is
  # part of its total.
  python3 - "$work/shm.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    prepare, total = float(r["server_prepare_us"]), float(r["server_total_us"])
    assert 0 < prepare <= total, (prepare, total)
PY
done
# The run's metadata names the call it used (the last run: unary).
grep -q '"call": "Select"' "$work/shm.json"
# --transport=channel-shm: a channel per caller, every call from the host
# through its control block, every answer read back and verified.
"$loadgen" --target="unix:$sock" --transport=channel-shm --rows=8 --width=20000 --k=64 \
  --concurrency=1,3 --duration_s=1 --warmup_s=0.2 --verify_every=1 --progress=false \
  --json="$work/channel.json" | tee "$work/channel.txt"
awk '/^concurrency/ { if ($(NF-2) == 0 || $(NF-1) != 0 || $NF != 0) bad = 1; n++ }
     END { exit (n == 2 && !bad) ? 0 : 1 }' "$work/channel.txt"
grep -q '"call": "Channel"' "$work/channel.json"
if ls /dev/shm | grep -q "topk-loadgen-ch-"; then echo "the channel rows' segment leaked"; exit 1; fi
! "$loadgen" --target="unix:$sock" --transport=shm --call=bogus --rows=2 --width=1000 --k=8 \
  --concurrency=1 --duration_s=0.2 --warmup_s=0 --progress=false 2>"$work/err.txt"
grep -q -- "--call=bogus" "$work/err.txt"
"$loadgen" --target="unix:$sock" --call=echo --echo_bytes=300 --rows=1 --width=64 --k=8 \
  --concurrency=2 --duration_s=0.5 --warmup_s=0.1 --progress=false --json="$work/echo.json" |
  tee "$work/echo.txt"
# Calls were made and none failed (an answer that differs is an error).
awk '/^concurrency/ { if ($3 <= 0 || $NF != 0) bad = 1; n++ }
     END { exit (n == 1 && !bad) ? 0 : 1 }' "$work/echo.txt"
grep -q '"call": "Echo"' "$work/echo.json"
! "$loadgen" --target="unix:$sock" --call=echo --echo_bytes=0 --rows=1 --width=64 --k=8 \
  --concurrency=1 --duration_s=0.2 --warmup_s=0 --progress=false 2>"$work/err.txt"
grep -q -- "--echo_bytes=0" "$work/err.txt"
! "$loadgen" --target="unix:$sock.off" --call=echo --rows=1 --width=64 --k=8 --concurrency=1 \
  --duration_s=0.2 --warmup_s=0 --progress=false >"$work/echo-off.txt" 2>&1
! ls /dev/shm | grep -q "topk-loadgen-"
# Row starts as one pitch in the request instead of offsets in the region:
# every answer verified; refused for rows that are not evenly spaced.
"$loadgen" --target="unix:$sock" --transport=shm --row_layout=pitch --lengths=full --rows=8 \
  --width=20000 --k=64 --concurrency=2 --duration_s=0.5 --warmup_s=0.1 --verify_every=1 \
  --progress=false | tee "$work/pitch.txt"
awk '/^concurrency/ { if ($(NF-2) == 0 || $(NF-1) != 0 || $NF != 0) bad = 1; n++ }
     END { exit (n == 1 && !bad) ? 0 : 1 }' "$work/pitch.txt"
! "$loadgen" --target="unix:$sock" --transport=shm --row_layout=pitch --lengths=random --rows=8 \
  --width=20000 --k=64 --concurrency=1 --duration_s=0.2 --warmup_s=0 --progress=false \
  2>"$work/err.txt"
grep -q -- "--row_layout=pitch" "$work/err.txt"
# Callers spread over two regions (what --transport=ipc does over GPUs): the
# CSV's groups cell names both, each served, and the process CPU is reported.
"$loadgen" --target="unix:$sock" --transport=shm --ipc_device=0,3 --rows=8 --width=20000 --k=64 \
  --concurrency=4 --duration_s=0.5 --warmup_s=0.1 --verify_every=1 --progress=false \
  --csv="$work/groups.csv" | tee "$work/groups.txt"
awk '/^concurrency/ { if ($(NF-2) == 0 || $(NF-1) != 0 || $NF != 0) bad = 1; n++ }
     END { exit (n == 1 && !bad) ? 0 : 1 }' "$work/groups.txt"
python3 - "$work/groups.csv" <<'PY'
import csv, sys
row = next(csv.DictReader(open(sys.argv[1])))
groups = {}
for cell in row["groups"].split():
    name, *fields = cell.split(":")
    groups[name] = dict(f.split("=") for f in fields)
assert sorted(groups) == ["shm0", "shm3"], groups
total = float(row["req_per_s"])
shares = [float(g["req_per_s"]) for g in groups.values()]
assert all(s > 0 for s in shares), groups
assert abs(sum(shares) - total) <= 0.01 * total, (shares, total)
assert float(row["client_cpu_s"]) > 0, row["client_cpu_s"]
PY
! "$loadgen" --target="unix:$sock" --transport=shm --ipc_device=0,0 --rows=2 --width=1000 --k=8 \
  --concurrency=1 --duration_s=0.2 --warmup_s=0 --progress=false 2>"$work/err.txt"
grep -q -- "--ipc_device=0,0: device 0 is named twice" "$work/err.txt"
# FP16 rows in the segment (2-byte elements, offsets in elements of the type).
"$loadgen" --target="unix:$sock" --transport=shm --dtype=fp16 --rows=8 --width=20000 --k=64 \
  --concurrency=2 --duration_s=1 --warmup_s=0.2 --verify_every=1 --progress=false \
  | tee "$work/fp16.txt"
awk '/^concurrency/ { if ($(NF-2) == 0 || $(NF-1) != 0 || $NF != 0) bad = 1; n++ }
     END { exit (n == 1 && !bad) ? 0 : 1 }' "$work/fp16.txt"
! ls /dev/shm | grep -q "topk-loadgen-"
! "$loadgen" --target="unix:$sock.off" --transport=shm --rows=2 --width=1000 --k=8 \
  --concurrency=1 --duration_s=0.2 --warmup_s=0 --progress=false 2>"$work/err.txt"
grep -q -- "--enable_regions" "$work/err.txt"
