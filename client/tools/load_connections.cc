#include "load_connections.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace topk::tools {

absl::StatusOr<std::vector<std::unique_ptr<client::Client>>> OpenConnections(
    const ConnectionSpec& spec) {
  if (spec.count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--connections=", spec.count, ": at least 1"));
  }
  client::ClientOptions tls{.tls = spec.tls};
  if (absl::Status read = client::ReadTlsFiles(spec.tls_ca_path, spec.tls_cert_path,
                                               spec.tls_key_path, tls, {.roots = "--tls_ca"});
      !read.ok()) {
    return read;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> made = client::ChannelCredentials(tls);
  if (!made.ok()) return made.status();
  const std::shared_ptr<grpc::ChannelCredentials> credentials = *std::move(made);
  std::vector<std::unique_ptr<client::Client>> clients;
  for (int c = 0; c < spec.count; ++c) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
    args.SetMaxSendMessageSize(std::numeric_limits<int>::max());
    // A pool per channel: the count is the number of TCP connections.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    if (!spec.tls_server_name.empty()) args.SetSslTargetNameOverride(spec.tls_server_name);
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(spec.target, credentials, args);
    if (channel == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to ", spec.target));
    }
    clients.push_back(std::make_unique<client::Client>(std::move(channel)));
  }
  return clients;
}

}  // namespace topk::tools
