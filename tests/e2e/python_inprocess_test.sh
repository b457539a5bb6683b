#!/usr/bin/env bash
# client/python/tests/inprocess_test.py with every distinct python3 here:
# Debian's (grpcio present: ZeroCopyClient's checks are compared too) and the
# one first on PATH (often without grpcio or torch: the in-process errors a
# user there gets). Skips (77) when neither can import the package's needs.
# Usage: python_inprocess_test.sh PYTHON_PACKAGE_ROOT TEST_SCRIPT
set -euo pipefail
pyroot=$1 script=$2
ran=0
seen=""
for py in /usr/bin/python3 "$(command -v python3 || true)"; do
  [ -x "$py" ] || continue
  real=$(readlink -f "$(PYTHONPATH= "$py" -c 'import sys; print(sys.executable)')")
  case " $seen " in *" $real "*) continue ;; esac
  seen="$seen $real"
  echo "--- $py ($("$py" --version 2>&1))"
  PYTHONPATH=$pyroot "$py" "$script"
  ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "SKIP: no python3"; exit 77; }
echo "$ran interpreter(s) checked"
