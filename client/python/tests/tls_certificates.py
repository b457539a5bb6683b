#!/usr/bin/env python3
"""Certificates for the Python client's TLS test, made with the openssl CLI
(Debian's `openssl`: ca-certificates depends on it, and python3-venv of
scripts/setup-deps.sh pulls that in). Python's `cryptography` is not
assumed. EC P-256 keys, valid for a day: milliseconds each.

The set, in FOLDER:
  ca.pem                      the CA the server's certificate and the client's chain to
  server.pem, server.key      SAN DNS:topk.test only, so a client that reaches
                              127.0.0.1 must name it (TlsOptions.server_name)
  client.pem, client.key      a client certificate the CA signed
  stranger.pem, stranger.key  a client certificate another CA signed

Usage: tls_certificates.py FOLDER
"""
import os
import shutil
import subprocess
import sys

SERVER_NAME = "topk.test"
_LEAF_EXTENSIONS = ("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature,keyAgreement\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n"
                    "subjectAltName={alt_names}\n")


def have_openssl() -> bool:
    return shutil.which("openssl") is not None


def _openssl(*args):
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {done.stderr.strip()}")


def _new_key_args():
    return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


class TestCa:
    """A self-signed CA in `folder` (NAME.pem, NAME.key) that issues leaves."""

    def __init__(self, folder: str, name: str):
        self.folder = folder
        self.cert = os.path.join(folder, f"{name}.pem")
        self.key = os.path.join(folder, f"{name}.key")
        self._serial = 1
        _openssl("req", "-x509", *_new_key_args(), "-days", "1", "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 "-keyout", self.key, "-out", self.cert)

    def issue(self, name: str, alt_names: str):
        """A leaf for both server and client use: (NAME.pem, NAME.key)."""
        cert = os.path.join(self.folder, f"{name}.pem")
        key = os.path.join(self.folder, f"{name}.key")
        request = os.path.join(self.folder, f"{name}.csr")
        extensions = os.path.join(self.folder, f"{name}.ext")
        with open(extensions, "w") as f:
            f.write(_LEAF_EXTENSIONS.format(alt_names=alt_names))
        self._serial += 1
        _openssl("req", "-new", *_new_key_args(), "-subj", f"/CN={name}", "-keyout", key,
                 "-out", request)
        _openssl("x509", "-req", "-in", request, "-CA", self.cert, "-CAkey", self.key,
                 "-set_serial", str(self._serial), "-days", "1", "-extfile", extensions,
                 "-out", cert)
        os.remove(request)
        os.remove(extensions)
        return cert, key


def write_set(folder: str) -> None:
    ca = TestCa(folder, "ca")
    ca.issue("server", f"DNS:{SERVER_NAME}")
    ca.issue("client", "DNS:client.topk.test")
    TestCa(folder, "other-ca").issue("stranger", "DNS:stranger.topk.test")


if __name__ == "__main__":
    write_set(sys.argv[1])
