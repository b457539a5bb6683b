#include "server/tls_credentials.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

constexpr char kIdentityFile[] = "identity.pem";
constexpr char kClientCaFile[] = "client_ca.pem";
// How often gRPC's own watcher re-reads the private copies: they change only
// when this class replaces them, so the cost is two small reads a second.
constexpr unsigned kGrpcRefreshSeconds = 1;

std::string OsError(absl::string_view what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

// Writes `text` to `directory`/`name` through a temporary file and one
// rename(), so a reader finds the old file or the new one, whole; mtime
// `seconds` (readers compare mtimes to notice a file replaced mid-read).
absl::Status ReplaceFile(const std::string& directory, const char* name, const std::string& text,
                         time_t seconds) {
  const std::string final_path = absl::StrCat(directory, "/", name);
  const std::string temporary = final_path + ".new";
  unlink(temporary.c_str());  // left by a write that failed
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(OsError("cannot create", temporary));
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n <= 0) {
      const absl::Status failed = absl::InternalError(OsError("cannot write", temporary));
      close(fd);
      unlink(temporary.c_str());
      return failed;
    }
    written += static_cast<size_t>(n);
  }
  const timespec times[2] = {{.tv_sec = seconds, .tv_nsec = 0}, {.tv_sec = seconds, .tv_nsec = 0}};
  const bool timed = futimens(fd, times) == 0;
  close(fd);
  if (!timed || rename(temporary.c_str(), final_path.c_str()) != 0) {
    const absl::Status failed = absl::InternalError(OsError("cannot replace", final_path));
    unlink(temporary.c_str());
    return failed;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakePrivateDirectory() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/topk-tls-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {  // mode 0700
    return absl::InternalError(
        absl::StrCat("TLS: cannot create a private directory for the watched copies of the "
                     "certificate files (",
                     OsError("mkdtemp", pattern), "); set TMPDIR to a writable directory"));
  }
  return pattern;
}

std::string Describe(const TlsMaterial& material) {
  return absl::StrCat(
      material.leaf_subject, ", valid until ",
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", material.leaf_not_after, absl::UTCTimeZone()));
}

bool SameFiles(const TlsMaterial& a, const TlsMaterial& b) {
  return a.cert_chain == b.cert_chain && a.private_key == b.private_key &&
         a.client_ca == b.client_ca;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerTlsCredentials>> ServerTlsCredentials::Create(
    const TlsFilePaths& paths, absl::Duration reload_interval) {
  if (reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_reload_interval=", absl::FormatDuration(reload_interval), " is below 1s"));
  }
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(paths);
  if (!material.ok()) return material.status();
  absl::StatusOr<std::string> directory = MakePrivateDirectory();
  if (!directory.ok()) return directory.status();
  auto credentials = absl::WrapUnique(new ServerTlsCredentials(paths, reload_interval, *directory));
  if (absl::Status staged = credentials->Stage(*material); !staged.ok()) return staged;
  credentials->in_service_ = *std::move(material);

  const std::string identity = absl::StrCat(*directory, "/", kIdentityFile);
  const std::string client_ca =
      paths.client_ca.empty() ? "" : absl::StrCat(*directory, "/", kClientCaFile);
  // Key and chain in one file: gRPC reads it as both.
  credentials->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      identity, identity, client_ca, kGrpcRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions network(credentials->provider_);
  network.watch_identity_key_cert_pairs();
  if (!paths.client_ca.empty()) {
    network.watch_root_certs();
    network.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  credentials->network_ = grpc::experimental::TlsServerCredentials(network);
  grpc::experimental::TlsServerCredentialsOptions local(credentials->provider_);
  local.watch_identity_key_cert_pairs();
  credentials->local_ = grpc::experimental::TlsServerCredentials(local);
  if (credentials->network_ == nullptr || credentials->local_ == nullptr) {
    return absl::InternalError("TLS: gRPC refused the TLS server credentials");
  }
  spdlog::info(
      "TLS: serving {}{}; the files are re-read every {}", Describe(credentials->in_service_),
      paths.client_ca.empty()
          ? ""
          : absl::StrCat(
                "; client certificates required on TCP listeners (roots: ", paths.client_ca, ")"),
      absl::FormatDuration(reload_interval));
  ServerTlsCredentials* raw = credentials.get();
  credentials->watcher_ = std::thread([raw] { raw->Watch(); });
  return credentials;
}

ServerTlsCredentials::ServerTlsCredentials(TlsFilePaths paths, absl::Duration reload_interval,
                                           std::string directory)
    : paths_(std::move(paths)),
      reload_interval_(reload_interval),
      directory_(std::move(directory)) {}

ServerTlsCredentials::~ServerTlsCredentials() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
  // gRPC's watcher goes before its files (it would log them missing).
  network_.reset();
  local_.reset();
  provider_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

absl::Status ServerTlsCredentials::Stage(const TlsMaterial& material) {
  // A new mtime for every set, even two within one second: gRPC compares
  // whole seconds.
  generation_ = std::max<int64_t>(generation_ + 1, std::time(nullptr));
  if (!material.client_ca.empty()) {
    if (absl::Status s = ReplaceFile(directory_, kClientCaFile, material.client_ca, generation_);
        !s.ok()) {
      return s;
    }
  }
  // The key first: gRPC (through OpenSSL) skips the blocks that are not the
  // kind it reads, so one file serves as key and as chain.
  return ReplaceFile(directory_, kIdentityFile,
                     absl::StrCat(material.private_key, "\n", material.cert_chain), generation_);
}

void ServerTlsCredentials::Watch() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), reload_interval_)) return;
    }
    Reload();
  }
}

void ServerTlsCredentials::Reload() {
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(paths_);
  if (!material.ok()) {
    // Files being replaced one by one fail here for a moment (a new key
    // beside the old chain); say so once per distinct failure.
    const std::string reason(material.status().message());
    if (reason != refused_) {
      spdlog::warn("TLS: the new files are refused ({}); new handshakes keep {}", reason,
                   Describe(in_service_));
      refused_ = reason;
    }
    return;
  }
  refused_.clear();
  if (SameFiles(*material, in_service_)) return;
  if (absl::Status staged = Stage(*material); !staged.ok()) {
    spdlog::error("TLS: cannot put the new files in service ({}); new handshakes keep {}",
                  staged.ToString(), Describe(in_service_));
    return;
  }
  spdlog::info("TLS: new files in service for new handshakes within {}: {}{}",
               absl::FormatDuration(absl::Seconds(kGrpcRefreshSeconds)), Describe(*material),
               material->client_ca != in_service_.client_ca ? " (client roots changed)" : "");
  in_service_ = *std::move(material);
}

}  // namespace topk::server
