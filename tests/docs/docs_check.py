#!/usr/bin/env python3
"""The mechanical facts of the docs against the tree. In README.md, docs/*.md,
bench/results/README.md and tools/gpu-lab/README.md: every repository path
named exists; every `--flag` is defined by some program of the tree (an
ABSL_FLAG, or an argparse option of a Python tool); every route name is one
RouteName returns; every `max_*` limit name is a field of RequestLimits, a
flag, a field of the proto or an option of the clients. Prints file:line for
each miss and fails on any.

bench/NOTES.md is not checked: it is history, and names flags and files that
were measured and removed since.

tests/docs/flags_doc_test.py checks topk-server's flag table and defaults
against docs/service.md; this check only asks that a flag exists somewhere.

Usage: docs_check.py SOURCE_DIR
"""
import os
import pathlib
import re
import sys

DOCS = ["README.md", "docs/*.md", "bench/results/README.md", "tools/gpu-lab/README.md"]
TOP_DIRS = ["bench", "client", "cmake", "deploy", "docs", "kernels", "proto", "scripts",
            "server", "tests", "tools"]
# Public headers are named by their include path (`topk/cuda/status.h`).
INCLUDE_ROOTS = ["kernels/include", "client/include"]

# Mentions that look like a path, a flag or a route but are not of this tree.
ALLOWED = {
    # Other programs' options, named where the docs show their command lines.
    "--benchmark_min_time",   # Google Benchmark
    "--gtest_filter",         # GoogleTest
    "--help", "--helpon", "--version",  # absl's built-in flags
    "--build", "--install", "--prefix",  # CMake's command line
}

PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w.*{},/-]*)" % "|".join(TOP_DIRS))
INCLUDE_PATH = re.compile(r"`(topk/[\w./*{},-]+)`")
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*)(?![\w-])")
ROUTE = re.compile(r"(?<![\w-])([a-z0-9]+(?:-[a-z0-9]+)*-(?:sampled|exact))(?![\w-])")
LIMIT = re.compile(r"(?<![\w-])(max_[a-z0-9_]+)")


def expand(path):
    """`a/b.{h,cc}` -> a/b.h, a/b.cc (one brace group is all the docs use)."""
    match = re.search(r"\{([^}]*)\}", path)
    if not match:
        return [path]
    return [path[:match.start()] + part + path[match.end():] for part in match.group(1).split(",")]


def exists(root, path):
    """A file, folder or glob; a test named by its target (`tests/e2e/x_test`)
    is the file of that stem."""
    for candidate in expand(path.rstrip(".,:;)")):
        if "*" in candidate:
            found = any(root.glob(candidate))
        else:
            found = (root / candidate).exists() or any(root.glob(candidate + ".*"))
        if not found:
            return False
    return True


def tree_files(root):
    """The tree's files, without .git and build folders."""
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "build"))]
        for name in files:
            yield pathlib.Path(folder, name)


def words(files, suffixes, regex, under=""):
    found = set()
    for path in files:
        if path.suffix in suffixes and str(path).startswith(under):
            found.update(regex.findall(path.read_text(errors="replace")))
    return found


def known_names(root):
    files = list(tree_files(root))
    flags = words(files, {".cc", ".cu", ".h"}, re.compile(r"ABSL_FLAG\(\s*[\w:<>, ]+?,\s*(\w+)\s*,"))
    flags |= words(files, {".py"}, re.compile(r"add_argument\(\s*[\"']--([\w-]+)"))
    plan = (root / "kernels/src/common/plan.cc").read_text()
    routes = set(re.findall(r'return "([a-z-]+)";', plan.split("RouteName", 1)[1].split("\n}", 1)[0]))
    backend = (root / "server/backends/backend.h").read_text()
    limits = set(re.findall(r"\b(max_\w+)\s*=", backend.split("struct RequestLimits", 1)[1]
                            .split("};", 1)[0]))
    limits |= words(files, {".proto"}, re.compile(r"\b(max_\w+)\s*=\s*\d+;"))
    # The clients' options (C++ and Python) name the channel's limits.
    limits |= words(files, {".h", ".py"}, re.compile(r"\b(max_\w+)\b"), str(root / "client"))
    return flags, routes, limits | flags


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    flags, routes, limits = known_names(root)
    errors = []
    docs = sorted({p for pattern in DOCS for p in root.glob(pattern)})
    for doc in docs:
        doc_name = doc.relative_to(root)
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            where = f"{doc_name}:{number}"
            for path in PATH.findall(line):
                if path.rstrip(".,:;)") not in ALLOWED and not exists(root, path):
                    errors.append(f"{where}: no file or folder {path}")
            for path in INCLUDE_PATH.findall(line):
                if not any(exists(root / inc, path) for inc in INCLUDE_ROOTS):
                    errors.append(f"{where}: no public header {path}")
            for flag in FLAG.findall(line):
                name = flag[2:] if flag.startswith("no") and flag[2:] in flags else flag
                if name not in flags and "--" + flag not in ALLOWED:
                    errors.append(f"{where}: no program defines --{flag}")
            for route in ROUTE.findall(line):
                if route not in routes and route not in ALLOWED:
                    errors.append(f"{where}: no route named {route}")
            for limit in LIMIT.findall(line):
                if limit not in limits and limit not in ALLOWED:
                    errors.append(f"{where}: no limit, flag or field named {limit}")
    for error in errors:
        print("FAIL:", error)
    print(f"{len(docs)} docs checked against {len(flags)} flags, {len(routes)} routes, "
          f"{len(limits)} limit names: {len(errors)} stale mentions")
    return 1 if errors or not docs else 0


if __name__ == "__main__":
    sys.exit(main())
