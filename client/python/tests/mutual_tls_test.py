#!/usr/bin/env python3
"""The Python client over mutual TLS, against a topk-server (CPU backend,
--enable_regions) started with --tls_cert/--tls_key/--tls_client_ca and the
certificates of tls_certificates.py:

* with the CA's client certificate (TlsOptions.from_files), exact answers on
  every path: TopKClient over grpcio and over the native core,
  AsyncTopKClient, ZeroCopyClient's session and selects (both paths);
* refused at the handshake (UNAVAILABLE, a grpc.RpcError on both paths):
  no client certificate, one another CA signed, plaintext, and a server
  name that is not the certificate's (so the server_name given is used);
* argument errors: a certificate without its key (and the reverse), text
  that is no PEM, a path where PEM bytes go, tls beside credentials, and a
  core that predates TLS (refused when required, grpcio otherwise).

Usage: mutual_tls_test.py --target 127.0.0.1:PORT --certs FOLDER [--library PATH]
"""
import argparse
import asyncio
import os

import grpc
import numpy as np

from tls_certificates import SERVER_NAME
from topk_client import AsyncTopKClient, TlsOptions, TopKClient, ZeroCopyClient
from topk_client import _native

CALL_SECONDS = 5  # a refused handshake fails at once; this only bounds a hang


def tls_options(certs, client=None, server_name=SERVER_NAME):
    """Roots from ca.pem, with the client certificate `client` (a stem in
    `certs`, or None) and its key."""
    def path(name):
        return os.path.join(certs, name)
    return TlsOptions.from_files(path("ca.pem"), client and path(f"{client}.pem"),
                                 client and path(f"{client}.key"), server_name)


def rows_and_answer(k):
    """Rows with distinct values (one exact answer) and their top-k indices."""
    rng = np.random.default_rng(33)
    rows = np.stack([rng.permutation(4096).astype(np.float32) for _ in range(3)])
    return rows, np.argsort(-rows, axis=1, kind="stable")[:, :k]


def check_exact(result, want):
    assert np.array_equal(result.indices, want), "not the top-k"


def check_clients(target, good, library):
    k = 64
    rows, want = rows_and_answer(k)
    paths = [("grpcio", False)] + ([("native core", library)] if library else [])
    for name, native in paths:
        with TopKClient(target, tls=good, native=native) as client:
            assert client.native == bool(native), name
            check_exact(client.select(rows, k, sorted=True, timeout=CALL_SECONDS), want)
            assert client.is_serving()
        with ZeroCopyClient(target, tls=good, native=native) as topk:
            assert topk.native == bool(native), name
            scores = topk.shared_array(rows.shape, np.float32)
            scores[:] = rows
            lengths = np.full(rows.shape[0], rows.shape[1], np.int32)
            assert np.array_equal(topk.select(scores, lengths, k, sorted=True), want), name
        print(f"mutual TLS, {name}: exact")

    async def awaited():
        async with AsyncTopKClient(target, tls=good) as client:
            check_exact(await client.select(rows, k, sorted=True, timeout=CALL_SECONDS), want)
    asyncio.run(awaited())
    print("mutual TLS, asyncio: exact")


def expect_refused(target, library, **client_kwargs):
    """Each path's first call fails with UNAVAILABLE (a grpc.RpcError)."""
    rows, _ = rows_and_answer(4)
    for native in [False] + ([library] if library else []):
        with TopKClient(target, native=native, **client_kwargs) as client:
            try:
                client.select(rows, 4, timeout=CALL_SECONDS)
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.UNAVAILABLE, (client_kwargs, e)
            else:
                raise AssertionError(f"accepted: {client_kwargs}, native={native}")


def check_refusals(target, certs, library):
    expect_refused(target, library, tls=tls_options(certs))                 # no certificate
    expect_refused(target, library, tls=tls_options(certs, "stranger"))     # another CA
    expect_refused(target, library, tls=tls_options(certs, "client", server_name=None))
    expect_refused(target, library)                                         # plaintext
    print("mutual TLS refusals: UNAVAILABLE on every path")


def expect_error(error_type, words, make):
    try:
        make()
    except error_type as e:
        assert all(w in str(e) for w in words), (words, str(e))
    else:
        raise AssertionError(f"accepted, wanted {error_type.__name__}: {words}")


def check_arguments(target, certs, library):
    good = tls_options(certs, "client")
    pem, key = good.certificate_chain, good.private_key
    expect_error(ValueError, ["private_key: missing", "certificate_chain"],
                 lambda: TlsOptions(certificate_chain=pem))
    expect_error(ValueError, ["certificate_chain: missing", "private_key"],
                 lambda: TlsOptions(private_key=key))
    expect_error(ValueError, ["private_key: missing"],
                 lambda: TlsOptions.from_files(certificate_chain=os.path.join(certs, "client.pem")))
    expect_error(ValueError, ["root_certificates: not PEM"],
                 lambda: TlsOptions(root_certificates=b"/etc/ssl/ca.pem"))
    expect_error(ValueError, ["certificate_chain: PEM text with a NUL"],
                 lambda: TlsOptions(certificate_chain=pem + b"\0", private_key=key))
    expect_error(TypeError, ["root_certificates: PEM bytes, got str", "from_files"],
                 lambda: TlsOptions(root_certificates=os.path.join(certs, "ca.pem")))
    expect_error(ValueError, ["server_name"], lambda: TlsOptions(server_name=""))
    expect_error(FileNotFoundError, ["no-such.pem"],
                 lambda: TlsOptions.from_files(os.path.join(certs, "no-such.pem")))
    assert "PRIVATE" not in repr(good) and "private_key" in repr(good), repr(good)
    expect_error(TypeError, ["tls: a topk_client.TlsOptions"],
                 lambda: TopKClient(target, tls=pem, native=False))
    expect_error(ValueError, ["credentials, tls: pass one"],
                 lambda: TopKClient(target, tls=good, native=False,
                                    credentials=grpc.ssl_channel_credentials()))
    if library:
        expect_error(ValueError, ["native: the native RPC core takes neither credentials"],
                     lambda: TopKClient(target, native=library,
                                        credentials=grpc.ssl_channel_credentials()))
        # A core built before topk_rpc_client_open_tls: required, a clear
        # error; by default, grpcio (which does TLS).
        saved = _native.has_tls
        _native.has_tls = lambda lib: False
        try:
            expect_error(RuntimeError, ["predates TLS", "native=False"],
                         lambda: TopKClient(target, tls=good, native=library))
            with TopKClient(target, tls=good) as client:
                assert not client.native
        finally:
            _native.has_tls = saved
    print("TLS argument errors: named")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--certs", required=True)
    parser.add_argument("--library", default="")
    args = parser.parse_args()
    good = tls_options(args.certs, "client")
    assert good.client_certificate
    check_clients(args.target, good, args.library)
    check_refusals(args.target, args.certs, args.library)
    check_arguments(args.target, args.certs, args.library)


if __name__ == "__main__":
    main()
