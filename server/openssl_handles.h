// One owner per OpenSSL object the server (and its TLS tests) hold:
// unique_ptrs that free a BIO, a certificate or a key the one right way.
#pragma once

#include <memory>

#include "openssl/bio.h"
#include "openssl/evp.h"
#include "openssl/x509.h"

namespace topk::server {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using PrivateKey = std::unique_ptr<EVP_PKEY, KeyFree>;

}  // namespace topk::server
