// The connections topk-loadgen spreads its calls over: `count` channels, each
// with its own TCP connection (a channel per caller would otherwise share one
// connection, since gRPC pools connections of identical channels), plain or
// TLS.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "topk/client/client.h"

namespace topk::tools {

struct ConnectionSpec {
  std::string target;
  int count = 1;
  bool tls = false;
  std::string tls_ca_path;      // PEM roots; empty: the system roots
  std::string tls_server_name;  // name checked in the server certificate, if not the target's
  // The client's certificate chain and key (PEM files) for mutual TLS.
  std::string tls_cert_path;
  std::string tls_key_path;
};

absl::StatusOr<std::vector<std::unique_ptr<client::Client>>> OpenConnections(
    const ConnectionSpec& spec);

}  // namespace topk::tools
