#!/usr/bin/env python3
"""topk-server's flags against docs/service.md's flag table: every flag the
binary defines is documented, every documented flag exists, and each row's
default cell shows the binary's default (in backticks; `empty` for "").

Usage: flags_doc_test.py TOPK_SERVER SERVICE_MD
"""
import re
import subprocess
import sys


def binary_defaults(server):
    # --helpon=main: only the flags defined in server/main.cc.
    text = subprocess.run([server, "--helpon=main"], capture_output=True, text=True).stdout
    text = " ".join(text.split())  # absl wraps long help lines
    return {name: value.strip('"') for name, value in
            re.findall(r"--(\w+) \(.*?\); default: (.*?);", text)}


def documented_defaults(service_md):
    rows = {}
    in_table = False
    for line in open(service_md, encoding="utf-8"):
        if line.startswith("## "):
            in_table = line.strip() == "## Flags"
            continue
        if not in_table or not line.startswith("| `--"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for name in re.findall(r"`--(\w+)`", cells[0]):
            rows[name] = cells[1]
    return rows


def main():
    server, service_md = sys.argv[1], sys.argv[2]
    binary = binary_defaults(server)
    docs = documented_defaults(service_md)
    if not binary:
        print("FAIL: no flags read from", server, "--helpon=main")
        return 1
    errors = []
    for name in sorted(set(binary) - set(docs)):
        errors.append(f"--{name}: defined by topk-server but missing from the table")
    for name in sorted(set(docs) - set(binary)):
        errors.append(f"--{name}: in the table but not a topk-server flag")
    for name in sorted(set(binary) & set(docs)):
        want = "empty" if binary[name] == "" else f"`{binary[name]}`"
        if want not in docs[name]:
            errors.append(f"--{name}: default is {want}, the table says '{docs[name]}'")
    for error in errors:
        print("FAIL:", error)
    print(f"{len(binary)} flags checked, {len(errors)} disagreements")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
