#include "server/tls_material.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "openssl/asn1.h"
#include "openssl/bio.h"
#include "openssl/err.h"
#include "openssl/evp.h"
#include "openssl/pem.h"
#include "openssl/x509.h"
#include "server/openssl_handles.h"

namespace topk::server {
namespace {

absl::StatusOr<std::string> ReadWhole(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// OpenSSL's most recent reason, for the message; clears its queue.
std::string OpenSslReason() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "no PEM block of the expected kind";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

Bio MemoryBio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Every PEM block of `text`, as certificates; at least one, and no block
// that does not parse (a truncated file, a key pasted into the bundle).
absl::StatusOr<std::vector<Certificate>> ParseCertificates(const std::string& text,
                                                           absl::string_view what) {
  std::vector<Certificate> certificates;
  Bio bio = MemoryBio(text);
  if (bio == nullptr) return absl::ResourceExhaustedError("cannot allocate an OpenSSL BIO");
  ERR_clear_error();
  while (true) {
    Certificate cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    certificates.push_back(std::move(cert));
  }
  // The loop ends at the end of the text (PEM_R_NO_START_LINE) or at a
  // block that does not parse.
  const unsigned long last = ERR_peek_last_error();
  const bool at_end =
      ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  if (certificates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what,
                                                   ": not a PEM file with a CERTIFICATE block (",
                                                   at_end ? "none found" : OpenSslReason(), ")"));
  }
  if (last != 0 && !at_end) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the CERTIFICATE block after the first ",
                                                   certificates.size(), " does not parse (",
                                                   OpenSslReason(), ")"));
  }
  ERR_clear_error();
  return certificates;
}

absl::Time NotAfter(const X509* cert) {
  tm when{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &when) != 1) return absl::InfiniteFuture();
  return absl::FromTM(when, absl::UTCTimeZone());
}

std::string Subject(const X509* cert) {
  char text[512];
  X509_NAME_oneline(X509_get_subject_name(cert), text, sizeof(text));
  return text;
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFilePaths& paths) {
  const std::string cert_flag = absl::StrCat("--tls_cert=", paths.cert);
  const std::string key_flag = absl::StrCat("--tls_key=", paths.key);
  TlsMaterial material;
  absl::StatusOr<std::string> chain = ReadWhole(paths.cert, "--tls_cert");
  if (!chain.ok()) return chain.status();
  absl::StatusOr<std::string> key = ReadWhole(paths.key, "--tls_key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::vector<Certificate>> certificates = ParseCertificates(*chain, cert_flag);
  if (!certificates.ok()) return certificates.status();
  Bio key_bio = MemoryBio(*key);
  if (key_bio == nullptr) return absl::ResourceExhaustedError("cannot allocate an OpenSSL BIO");
  ERR_clear_error();
  PrivateKey private_key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (private_key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_flag, ": not a PEM PRIVATE KEY (", OpenSslReason(), ")"));
  }
  const X509* leaf = certificates->front().get();
  if (X509_check_private_key(leaf, private_key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat(key_flag, ": the private key does not match the certificate in ", cert_flag));
  }
  material.leaf_subject = Subject(leaf);
  material.leaf_not_after = NotAfter(leaf);
  material.cert_chain = *std::move(chain);
  material.private_key = *std::move(key);
  if (!paths.client_ca.empty()) {
    absl::StatusOr<std::string> roots = ReadWhole(paths.client_ca, "--tls_client_ca");
    if (!roots.ok()) return roots.status();
    absl::StatusOr<std::vector<Certificate>> ca =
        ParseCertificates(*roots, absl::StrCat("--tls_client_ca=", paths.client_ca));
    if (!ca.ok()) return ca.status();
    material.client_ca = *std::move(roots);
  }
  return material;
}

}  // namespace topk::server
