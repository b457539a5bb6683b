// Certificates the TLS suites make for themselves with OpenSSL's C API (the
// library gRPC already links; no openssl CLI needed, so nothing skips): a
// CA, and leaves it signs for 127.0.0.1 / localhost, valid now or expired.
// EC P-256 keys: milliseconds to make.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "openssl/bio.h"
#include "openssl/evp.h"
#include "openssl/pem.h"
#include "openssl/rand.h"
#include "openssl/x509.h"
#include "openssl/x509v3.h"
#include "server/openssl_handles.h"
#include "topk/client/client.h"

namespace topk::server::test {

struct TestKeyPair {
  std::string cert_pem;
  std::string key_pem;
};

class TestCa {
 public:
  explicit TestCa(const std::string& common_name) : key_(NewKey()) {
    cert_ = NewCertificate(common_name, key_.get(), nullptr, key_.get(), -absl::Hours(1),
                           absl::Hours(24), "critical,CA:TRUE", "critical,keyCertSign,cRLSign",
                           nullptr, nullptr);
  }

  std::string cert_pem() const { return CertPem(cert_.get()); }

  // A leaf this CA signs: SAN localhost and 127.0.0.1, usable by a server
  // and a client, valid from now + not_before to now + not_after.
  TestKeyPair Issue(const std::string& common_name, absl::Duration not_before = -absl::Hours(1),
                    absl::Duration not_after = absl::Hours(24)) const {
    PrivateKey key = NewKey();
    Certificate cert =
        NewCertificate(common_name, key.get(), cert_.get(), key_.get(), not_before, not_after,
                       "critical,CA:FALSE", "critical,digitalSignature,keyAgreement",
                       "serverAuth,clientAuth", "DNS:localhost,IP:127.0.0.1");
    return {.cert_pem = CertPem(cert.get()), .key_pem = KeyPem(key.get())};
  }

  // Expired a day ago.
  TestKeyPair IssueExpired(const std::string& common_name) const {
    return Issue(common_name, -absl::Hours(48), -absl::Hours(24));
  }

 private:
  static PrivateKey NewKey() {
    PrivateKey key(EVP_EC_gen("P-256"));
    EXPECT_NE(key, nullptr) << "EVP_EC_gen failed";
    return key;
  }

  static void AddExtension(X509* cert, X509V3_CTX* context, int nid, const char* value) {
    if (value == nullptr) return;
    X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, context, nid, value);
    ASSERT_NE(extension, nullptr) << "extension " << value;
    X509_add_ext(cert, extension, -1);
    X509_EXTENSION_free(extension);
  }

  // Signed by `issuer_key` as `issuer` (nullptr: self-signed).
  static Certificate NewCertificate(const std::string& common_name, EVP_PKEY* key,
                                    const X509* issuer, EVP_PKEY* issuer_key,
                                    absl::Duration not_before, absl::Duration not_after,
                                    const char* basic_constraints, const char* key_usage,
                                    const char* extended_usage, const char* alt_names) {
    Certificate cert(X509_new());
    X509_set_version(cert.get(), 2);
    unsigned char serial[16];
    RAND_bytes(serial, sizeof(serial));
    serial[0] &= 0x7f;  // positive
    BIGNUM* number = BN_bin2bn(serial, sizeof(serial), nullptr);
    BN_to_ASN1_INTEGER(number, X509_get_serialNumber(cert.get()));
    BN_free(number);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), absl::ToInt64Seconds(not_before));
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), absl::ToInt64Seconds(not_after));
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                               0);
    X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
    X509_set_pubkey(cert.get(), key);
    X509V3_CTX context;
    X509V3_set_ctx_nodb(&context);
    X509V3_set_ctx(&context, issuer != nullptr ? const_cast<X509*>(issuer) : cert.get(), cert.get(),
                   nullptr, nullptr, 0);
    AddExtension(cert.get(), &context, NID_basic_constraints, basic_constraints);
    AddExtension(cert.get(), &context, NID_key_usage, key_usage);
    AddExtension(cert.get(), &context, NID_ext_key_usage, extended_usage);
    AddExtension(cert.get(), &context, NID_subject_alt_name, alt_names);
    AddExtension(cert.get(), &context, NID_subject_key_identifier, "hash");
    EXPECT_GT(X509_sign(cert.get(), issuer_key, EVP_sha256()), 0) << "X509_sign failed";
    return cert;
  }

  template <typename Write>
  static std::string Pem(Write write) {
    Bio bio(BIO_new(BIO_s_mem()));
    EXPECT_EQ(write(bio.get()), 1);
    char* data = nullptr;
    const long bytes = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<size_t>(bytes));
  }
  static std::string CertPem(X509* cert) {
    return Pem([cert](BIO* bio) { return PEM_write_bio_X509(bio, cert); });
  }
  static std::string KeyPem(EVP_PKEY* key) {
    return Pem([key](BIO* bio) {
      return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
    });
  }

  PrivateKey key_;
  Certificate cert_;
};

// Replaces `path` with `text` at once (a temporary file, then rename()), as
// a certificate manager or the kubelet puts new files in place.
inline void ReplaceFileAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0) << temporary;
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  ASSERT_EQ(rename(temporary.c_str(), path.c_str()), 0) << path;
}

// A TLS client of `target` that trusts `roots_pem` (checking the name
// "localhost") and presents `identity` (empty: no client certificate).
inline std::unique_ptr<client::Client> ConnectTls(const std::string& target,
                                                  const std::string& roots_pem,
                                                  const TestKeyPair& identity) {
  absl::StatusOr<std::unique_ptr<client::Client>> connected =
      client::Client::Connect({.target = target,
                               .tls = true,
                               .root_certs_pem = roots_pem,
                               .tls_server_name = "localhost",
                               .client_cert_pem = identity.cert_pem,
                               .client_key_pem = identity.key_pem});
  EXPECT_TRUE(connected.ok()) << connected.status();
  return connected.ok() ? *std::move(connected) : nullptr;
}

}  // namespace topk::server::test
