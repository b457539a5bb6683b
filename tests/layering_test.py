#!/usr/bin/env python3
"""The server's layers only call down: transport -> engine -> regions ->
backends -> selector library. A file may include its own layer and the
layers below it, never one above; only the transport includes gRPC,
Prometheus or the wire's messages. regions/ (client memory: sessions,
regions, leases and the checks of what a request names in them) sits under
the engine, whose channels hold leases, and over the backends, whose
RowSource and OutputTarget a binding yields. server/server.* and server/main.cc compose the layers and may
include them all.

Usage: layering_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

# Each layer and what it may include of the server.
ALLOWED = {
    "transport": {"transport", "engine", "regions", "backends"},
    "engine": {"engine", "regions", "backends"},
    "regions": {"regions", "backends"},
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
