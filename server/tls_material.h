// The server's TLS files, read and checked with OpenSSL before gRPC sees
// them: at start (a bad file stops the start, naming its flag) and at every
// rotation (a bad new file is logged and the files in service kept). gRPC
// would take a malformed or mismatched file only to fail every handshake.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace topk::server {

// Paths as the flags give them.
struct TlsFilePaths {
  std::string cert;       // --tls_cert: the certificate chain, leaf first
  std::string key;        // --tls_key: the leaf's private key
  std::string client_ca;  // --tls_client_ca: roots client certificates must chain to; empty: none
};

// The files' bytes, checked: every PEM block of the chain and of the client
// CA bundle parses as a certificate, the key parses and is the leaf's.
struct TlsMaterial {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;
  // What the log says about a set in service: the leaf's subject and end.
  std::string leaf_subject;
  absl::Time leaf_not_after = absl::InfiniteFuture();
};

// Reads and checks the three files. The error names the flag and the path:
// "--tls_key=/p: the private key does not match the certificate in
// --tls_cert=/q".
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFilePaths& paths);

}  // namespace topk::server
