"""TLS for the RPC clients (TopKClient, AsyncTopKClient, ZeroCopyClient):
the roots the server's certificate must chain to, this client's certificate
and key for a server that asks for one (mutual TLS: its --tls_client_ca),
and the name to check in the server's certificate.

    from topk_client import TlsOptions, TopKClient
    tls = TlsOptions.from_files(root_certificates="/etc/topk/ca.crt",
                                certificate_chain="/etc/topk/tls.crt",
                                private_key="/etc/topk/tls.key")
    client = TopKClient("topk:50051", tls=tls)

One object for both paths: grpcio builds grpc.ssl_channel_credentials from
it, and the native core hands the same PEM text to topk_rpc_client_open_tls.
Why PEM text rather than a grpc.ChannelCredentials (the `credentials`
argument, still taken by the grpcio path): grpcio's credentials are opaque,
so the native core could not use them. The files are read once, when the
options are made: a client made after a certificate rotation gets the new
ones.

Nothing here imports grpc: the checks run wherever the package imports.
"""

import os
from dataclasses import dataclass, fields
from typing import Optional, Union

_PEM_FIELDS = ("root_certificates", "certificate_chain", "private_key")
_PEM_BEGIN = b"-----BEGIN "

Path = Union[str, "os.PathLike[str]"]


def _check_pem(name: str, value) -> None:
    if value is None:
        return
    if not isinstance(value, bytes):
        # A str here is most often a path meant for from_files.
        raise TypeError(f"{name}: PEM bytes, got {type(value).__name__} "
                        "(TlsOptions.from_files reads PEM files)")
    if _PEM_BEGIN not in value:
        raise ValueError(f"{name}: not PEM (no '-----BEGIN ' line)")
    if b"\0" in value:
        # The native core takes C strings: a NUL would cut the text short.
        raise ValueError(f"{name}: PEM text with a NUL byte")


@dataclass(frozen=True)
class TlsOptions:
    """PEM bytes (None: not given). root_certificates None: the system roots.
    certificate_chain and private_key: both or neither. server_name: the
    name checked in the server's certificate when it is not the target's
    host (an address, say)."""

    root_certificates: Optional[bytes] = None
    certificate_chain: Optional[bytes] = None
    private_key: Optional[bytes] = None
    server_name: Optional[str] = None

    def __post_init__(self):
        for name in _PEM_FIELDS:
            _check_pem(name, getattr(self, name))
        if (self.certificate_chain is None) != (self.private_key is None):
            missing, given = (("private_key", "certificate_chain")
                              if self.private_key is None else
                              ("certificate_chain", "private_key"))
            raise ValueError(f"{missing}: missing while {given} is given (a client "
                             "certificate and its key go together)")
        if self.server_name is not None and (
                not isinstance(self.server_name, str) or not self.server_name
                or "\0" in self.server_name):
            raise ValueError(f"server_name: a non-empty name, got {self.server_name!r}")

    @classmethod
    def from_files(cls, root_certificates: Optional[Path] = None,
                   certificate_chain: Optional[Path] = None,
                   private_key: Optional[Path] = None,
                   server_name: Optional[str] = None) -> "TlsOptions":
        """The same options from PEM files (paths; None: not given)."""
        def read(path):
            if path is None:
                return None
            with open(path, "rb") as f:
                return f.read()
        return cls(read(root_certificates), read(certificate_chain), read(private_key),
                   server_name)

    @property
    def client_certificate(self) -> bool:
        """Whether this client presents a certificate (mutual TLS)."""
        return self.certificate_chain is not None

    def __repr__(self):
        # Never the key's text: repr() ends up in logs.
        given = [f.name for f in fields(self) if getattr(self, f.name) is not None]
        return f"TlsOptions({', '.join(given) or 'system roots'})"


def check_tls(tls) -> None:
    """A client's `tls` argument: None or a TlsOptions."""
    if tls is not None and not isinstance(tls, TlsOptions):
        raise TypeError(f"tls: a topk_client.TlsOptions, got {type(tls).__name__}")
