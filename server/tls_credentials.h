// TLS for the server's listeners, with files that rotate without a restart.
//
// gRPC's FileWatcherCertificateProvider re-reads its files every second and
// serves new handshakes with what it read, but takes whatever it finds: a
// half-written or mismatched file would fail every handshake from then on.
// So it watches private copies instead (a 0700 directory of its own), and
// this class polls the operator's files every `reload_interval`, checks a
// changed set with OpenSSL (tls_material.h) and only then replaces the
// copies; a set that fails is logged once and the one in service kept.
// Key and chain travel in one file, replaced by one rename() and given an
// mtime of their own, so gRPC (which re-reads a pair whose mtimes moved
// while it read) never pairs a new key with an old chain. New handshakes
// use new files at most reload_interval + 1 s after they are written;
// connections already open keep theirs.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/tls_material.h"

namespace grpc {
class ServerCredentials;
namespace experimental {
class CertificateProviderInterface;
}  // namespace experimental
}  // namespace grpc

namespace topk::server {

class ServerTlsCredentials {
 public:
  // Checks the files (the error names the flag), stages them and starts
  // watching. reload_interval: at least 1 s.
  static absl::StatusOr<std::unique_ptr<ServerTlsCredentials>> Create(
      const TlsFilePaths& paths, absl::Duration reload_interval);
  ~ServerTlsCredentials();  // stops the watcher, removes the private copies

  ServerTlsCredentials(const ServerTlsCredentials&) = delete;
  ServerTlsCredentials& operator=(const ServerTlsCredentials&) = delete;

  // For TCP listeners: with a client CA, a client certificate that chains
  // to it is required and verified at the handshake.
  std::shared_ptr<grpc::ServerCredentials> network() const { return network_; }
  // For unix sockets (governed by their file permissions): the server
  // certificate, no client certificate asked for.
  std::shared_ptr<grpc::ServerCredentials> local() const { return local_; }
  bool requires_client_certificates() const { return !paths_.client_ca.empty(); }

 private:
  ServerTlsCredentials(TlsFilePaths paths, absl::Duration reload_interval, std::string directory);
  absl::Status Stage(const TlsMaterial& material);
  void Watch();
  void Reload();

  const TlsFilePaths paths_;
  const absl::Duration reload_interval_;
  const std::string directory_;  // the private copies: identity.pem, client_ca.pem
  int64_t generation_ = 0;       // the copies' mtime: one second more per set
  TlsMaterial in_service_;       // the watcher thread's
  std::string refused_;          // the last set refused (logged once), the watcher's
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_;
  std::shared_ptr<grpc::ServerCredentials> network_;
  std::shared_ptr<grpc::ServerCredentials> local_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watcher_;
};

}  // namespace topk::server
