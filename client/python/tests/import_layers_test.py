"""The package's imports go one way (issue 31): no module of topk_client
imports, directly or through others, a module that imports it back
(function-level imports count), and the in-process layers stay below
nothing of the RPC side: inprocess <- torch_ops <- compat.*, none of which
imports the gRPC clients, the regions or the channels. Reads the sources
(ast), imports nothing: runs anywhere.

Usage: python3 import_layers_test.py PACKAGE_DIR   (client/python/topk_client)
"""
import ast
import os
import sys

# The in-process stack, bottom up: each may import only what is before it
# (and the package's helpers that import nothing of the RPC side).
IN_PROCESS = ["topk_client._checks", "topk_client._library", "topk_client.inprocess",
              "topk_client.torch_ops", "topk_client.compat._rows", "topk_client.compat._logits",
              "topk_client.compat._scratch", "topk_client.compat.vllm",
              "topk_client.compat.sglang", "topk_client.check"]


def module_name(root, path):
    relative = os.path.relpath(path, os.path.dirname(root))[:-3].replace(os.sep, ".")
    return relative[:-len(".__init__")] if relative.endswith(".__init__") else relative


def imports_of(path, name, modules):
    """The package modules `path` imports anywhere in its body."""
    found = set()
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            # `from pkg import mod` names the module; `from pkg import name`
            # the package (its __init__) only when name is no module.
            submodules = [f"{base}.{a.name}" for a in node.names]
            targets = [t for t in submodules if t in modules]
            if len(targets) < len(submodules):
                targets.append(base)
        else:
            continue
        found.update(t for t in targets if t in modules)
    found.discard(name)
    return found


def graph_of(root):
    paths = {}
    for folder, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py") and "_proto" not in folder:
                path = os.path.join(folder, f)
                paths[module_name(root, path)] = path
    modules = set(paths)
    return {name: imports_of(path, name, modules) for name, path in paths.items()}


def cycles(graph):
    """Every module that reaches itself, with one path that shows it."""
    found = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    found.append(" -> ".join(path + [start]))
                    stack = []
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return found


def main():
    root = os.path.abspath(sys.argv[1])
    graph = graph_of(root)
    assert "topk_client.channel" in graph and "topk_client.inprocess" in graph, sorted(graph)
    # The test can see a cycle: a made-up one is found.
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == ["a -> b -> a", "b -> a -> b"]
    loops = cycles(graph)
    assert not loops, "import cycles:\n  " + "\n  ".join(loops)
    helpers = {"topk_client"}  # the package's __init__ is imported by every submodule
    for i, name in enumerate(IN_PROCESS):
        if name not in graph:
            continue
        allowed = set(IN_PROCESS[:i]) | helpers | {"topk_client.compat"}
        extra = graph[name] - allowed
        assert not extra, f"{name} imports {sorted(extra)}, outside the in-process layers below it"
    print(f"{len(graph)} modules, no import cycle; the in-process layers import only downwards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
