#!/usr/bin/env python3
"""Compiler launcher that fails a CUDA object whose kernels spill registers.

Usage: spill_gate.py --allowlist FILE [--cxxfilt PATH] -- COMPILER ARGS...

The design's rule (docs/kernels.md, "Cold paths are __noinline__"): the hot
loops keep their registers. ptxas runs with -warn-spills, which names every
function that spills (stores registers to local memory) with its spill store
and load bytes, and -v (nvcc --resource-usage), whose report names the
architecture of each ptxas run. This script runs the compile, reads both, and
fails the object (deleting it, so that the next build compiles it again) when
a function spills that the allow-list does not allow, or spills more than its
entry allows. The spill warnings and the report are swallowed (they are this
script's input, hundreds of lines per object); everything else the compiler
prints passes through. Every spill warning of the object is left beside it, in
order, as <object>.spills.

The allow-list (see its header) names functions by glob over the demangled
name, with nvcc's per-file prefixes removed, so one entry holds for every
architecture and every translation unit that compiles the function.
"""

import argparse
import fnmatch
import os
import re
import subprocess
import sys

# ptxas -warn-spills: one line per function and entry that spills. They come
# before the -v report of the same ptxas run, whose entry lines name its arch.
SPILL_RE = re.compile(r"^ptxas warning\s*: Registers are spilled to local memory in function "
                      r"'([^']+)', (\d+) bytes spill stores, (\d+) bytes spill loads")
ENTRY_RE = re.compile(r"^ptxas info\s*: Compiling entry function '[^']+' for '(sm_\w+)'")
SWALLOWED_RE = re.compile(r"^ptxas info\s*:|^\s*\d+ bytes stack frame, |^ptxas warning\s*: "
                          r"Registers are spilled to local memory")

# nvcc gives internal-linkage device entities a per-file prefix,
# _INTERNAL_<hash>_<len>_<file>_cu_<hash>[_<n>]:: (c++filt shows it as a
# namespace); anonymous namespaces demangle as "(anonymous namespace)".
INTERNAL_PREFIX_RE = re.compile(r"_INTERNAL_[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+(?:_\d+)?::")

ALLOWLIST_ENTRY_RE = re.compile(r"^(\d+)\s+(\d+)\s+(\S.*)$")


class Entry:
    def __init__(self, line_no, max_stores, max_loads, pattern):
        self.line_no = line_no
        self.max_stores = max_stores
        self.max_loads = max_loads
        self.pattern = pattern


def read_allowlist(path):
    """Entries '<max store bytes> <max load bytes> <glob>'; each needs a comment above it or above
    its group (the lines since the last blank one) saying why it may spill."""
    entries = []
    commented = False
    with open(path, encoding="utf-8") as f:
        for line_no, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                commented = False
            elif line.startswith("#"):
                commented = commented or bool(line.lstrip("#").strip())
            else:
                m = ALLOWLIST_ENTRY_RE.match(line)
                if not m:
                    sys.exit(f"{path}:{line_no}: expected '<max store bytes> <max load bytes> "
                             "<glob>'")
                if not commented:
                    sys.exit(f"{path}:{line_no}: an entry needs a comment above it saying why "
                             "the function may spill")
                entries.append(Entry(line_no, int(m.group(1)), int(m.group(2)),
                                     m.group(3).strip()))
    return entries


def parse_spills(text):
    """[(arch, mangled name, store bytes, load bytes)] in ptxas's order."""
    spills = []
    pending = []  # this run's warnings, until its report names the arch
    for line in text.splitlines():
        m = SPILL_RE.match(line)
        if m:
            pending.append((m.group(1), int(m.group(2)), int(m.group(3))))
            continue
        m = ENTRY_RE.match(line)
        if m:
            spills += [(m.group(1), *p) for p in pending]
            pending = []
    return spills + [("sm_?", *p) for p in pending]


def demangle(names, cxxfilt):
    names = list(names)
    if not names:
        return {}
    try:
        out = subprocess.run([cxxfilt], input="\n".join(names) + "\n", capture_output=True,
                             text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        out = names  # globs may still match the mangled names
    return {n: INTERNAL_PREFIX_RE.sub("", d) for n, d in zip(names, out)}


def output_path(cmd):
    for i, arg in enumerate(cmd):
        if arg == "-o" and i + 1 < len(cmd):
            return cmd[i + 1]
        if arg.startswith("-o") and len(arg) > 2:
            return arg[2:]
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allowlist", required=True)
    parser.add_argument("--cxxfilt", default="c++filt")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        parser.error("no compiler command after --")

    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    for stream, text in ((sys.stdout, proc.stdout), (sys.stderr, proc.stderr)):
        kept = [l for l in text.splitlines(keepends=True) if not SWALLOWED_RE.match(l)]
        stream.write("".join(kept))
        stream.flush()
    if proc.returncode != 0:
        return proc.returncode

    spills = parse_spills(proc.stderr + "\n" + proc.stdout)
    names = demangle({name for _, name, _, _ in spills}, args.cxxfilt)
    entries = read_allowlist(args.allowlist)
    obj = output_path(cmd)

    if obj:
        with open(obj + ".spills", "w", encoding="utf-8") as f:
            f.write("# arch\tstore bytes\tload bytes\tfunction: every ptxas spill warning of "
                    "the object (cmake/spill_gate.py)\n")
            f.writelines(f"{a}\t{st}\t{ld}\t{names[n]}\n" for a, n, st, ld in spills)

    # One report per function outside its allowance, with its largest spill
    # over the architectures and entries it was compiled under (ptxas repeats
    # a callee under every entry that calls it).
    failures = {}
    for arch, name, stores, loads in spills:
        demangled = names[name]
        entry = next((e for e in entries if fnmatch.fnmatchcase(demangled, e.pattern)), None)
        if entry is not None and stores <= entry.max_stores and loads <= entry.max_loads:
            continue
        f = failures.setdefault(demangled, {"archs": set(), "stores": 0, "loads": 0})
        f["archs"].add(arch)
        f["stores"], f["loads"] = max(f["stores"], stores), max(f["loads"], loads)
        f["entry"] = entry
    if not failures:
        return 0

    where = os.path.basename(obj) if obj else "the object"
    sys.stderr.write(f"spill gate: {where}: register spills that {args.allowlist} "
                     "does not allow:\n")
    for demangled, f in failures.items():
        entry = f["entry"]
        why = ("no entry allows it" if entry is None else
               f"above the {entry.max_stores} / {entry.max_loads} B of its entry (line "
               f"{entry.line_no})")
        sys.stderr.write(f"  {demangled}\n    {f['stores']} B stored, {f['loads']} B loaded on "
                         f"{', '.join(sorted(f['archs']))}: {why}\n")
    sys.stderr.write("spill gate: keep the registers (docs/kernels.md), or add or raise the "
                     "function's entry in that file with the reason it may spill\n")
    if obj and os.path.exists(obj):
        os.remove(obj)  # the next build compiles it again instead of taking it as done
    return 1


if __name__ == "__main__":
    sys.exit(main())
