#!/usr/bin/env python3
"""The server's layers only call down: transport -> engine -> backends ->
selector library. A file may include its own layer and the layers below it,
never one above; the engine and the backends include nothing of gRPC or
Prometheus. server/server.* and server/main.cc compose the layers and may
include them all.

Usage: layering_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

# Each layer and what it may include of the server.
ALLOWED = {
    "transport": {"transport", "engine", "backends"},
    "engine": {"engine", "backends"},
    "backends": {"backends"},
}
TRANSPORT_ONLY = re.compile(r'#include [<"](grpc|grpcpp|prometheus|topk/v1/)')
SERVER_INCLUDE = re.compile(r'#include "server/([a-z_]+)[/.]')


def main():
    root = pathlib.Path(sys.argv[1]) / "server"
    errors = []
    checked = 0
    for layer, allowed in ALLOWED.items():
        for path in sorted((root / layer).glob("*")):
            checked += 1
            for number, line in enumerate(path.read_text().splitlines(), 1):
                where = f"{path.relative_to(root.parent)}:{number}"
                match = SERVER_INCLUDE.match(line)
                if match and match.group(1) not in allowed:
                    errors.append(f"{where}: {layer} includes server/{match.group(1)}: {line}")
                if layer != "transport" and TRANSPORT_ONLY.match(line):
                    errors.append(f"{where}: {layer} depends on the transport: {line}")
    for error in errors:
        print("FAIL:", error)
    print(f"{checked} files checked, {len(errors)} includes against the layering")
    return 1 if errors or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
