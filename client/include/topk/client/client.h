// C++ client of topk.v1.TopK. Depends only on the generated proto/gRPC code:
// no kernels, no testing library.
//
//   auto client = topk::client::Client::Connect({.target = "127.0.0.1:50051"});
//   auto result = (*client)->Select(2048, {.scores = scores, .lengths = lengths});
//   // result->indices: num_rows x k int32, -1 in slots a short row cannot fill
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "topk/v1/topk.grpc.pb.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace topk::client {

// Packed inline rows: row r's lengths[r] valid values follow row r-1's.
// FP32 rows fill `scores`; BF16 / FP16 rows set `dtype` and fill `scores16`
// with the raw 16-bit patterns instead (half the bytes on the wire).
struct Rows {
  absl::Span<const float> scores;  // FP32: sum(lengths) values
  absl::Span<const int32_t> lengths;
  v1::ScoreType dtype = v1::SCORE_TYPE_FP32;
  absl::Span<const uint16_t> scores16;  // BF16 / FP16: sum(lengths) bit patterns
};

// Rows of 16-bit scores (`dtype` SCORE_TYPE_BF16 or SCORE_TYPE_FP16), sent
// as they are: no conversion on either side.
inline Rows HalfRows(v1::ScoreType dtype, absl::Span<const uint16_t> scores,
                     absl::Span<const int32_t> lengths) {
  return Rows{.lengths = lengths, .dtype = dtype, .scores16 = scores};
}

// The score bytes of `rows` as they travel (little-endian, packed).
std::string_view ScoreBytes(const Rows& rows);

struct CallOptions {
  bool sorted = false;
  bool deterministic = false;
  bool return_values = false;
  std::string request_id;
  absl::Duration timeout = absl::InfiniteDuration();
  // Fail at once instead of waiting when the server is not reachable yet.
  bool fail_fast = true;
};

struct ServerTimings {
  int64_t queue_us = 0;
  int64_t device_us = 0;
  int64_t total_us = 0;
  // Requests the server served in the same launch as this one (1: not
  // coalesced; 0: a server that does not report it).
  int32_t batch_requests = 0;
  // Of total_us, before the queue: decoding, validation, region binding.
  int64_t prepare_us = 0;
};

struct SelectResult {
  int64_t num_rows = 0;
  int32_t k = 0;
  std::vector<int32_t> indices;  // num_rows x k
  // num_rows x k when return_values, in the request's type: `values` for
  // FP32, the raw patterns in `values16` for BF16 / FP16 (`values_dtype`).
  std::vector<float> values;
  std::vector<uint16_t> values16;
  v1::ScoreType values_dtype = v1::SCORE_TYPE_FP32;
  ServerTimings server;
  int64_t client_us = 0;  // round trip seen by the client
};

// SelectStream's default chunk: big enough that per-message costs vanish,
// small enough to stay far below every message limit.
inline constexpr size_t kDefaultChunkBytes = size_t{1} << 22;

struct ClientOptions {
  std::string target = "127.0.0.1:50051";
  // TLS when true; root_certs_pem empty: the system roots.
  bool tls = false;
  std::string root_certs_pem;
  std::string tls_server_name;  // override the name checked in the server certificate
  // The client's own certificate chain and private key (PEM), for a server
  // that requires one (mutual TLS: --tls_client_ca); both or neither.
  std::string client_cert_pem;
  std::string client_key_pem;
  int64_t max_message_bytes = int64_t{1} << 30;
  // Per direction when > 0, else max_message_bytes (grpcio's two limits).
  int64_t max_send_message_bytes = 0;
  int64_t max_receive_message_bytes = 0;
  // Client-side load balancing over every address the target resolves to
  // ("round_robin" spreads calls; "" is gRPC's default, pick_first). A
  // multi-address target: "ipv4:10.0.0.1:50051,10.0.0.2:50051", or a DNS
  // name with several A records ("dns:///topk.example:50051").
  std::string load_balancing_policy;
  // With a policy that supports it (round_robin), watch this grpc.health.v1
  // service on every address and route only to the SERVING ones, so a
  // replica in its lame-duck drain stops getting calls as soon as it turns
  // NOT_SERVING. "" turns it off.
  std::string health_check_service;
};

// The channel credentials `options` ask for: plaintext, TLS, or TLS with
// the client's certificate. INVALID_ARGUMENT when only one of the client
// certificate and key is given.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ClientOptions& options);

// Fills the TLS fields of `options` from PEM files (an empty path: not
// given); any file given turns TLS on. The error names the flag:
// `flags` are the names of the three (roots, certificate, key).
struct TlsFlagNames {
  const char* roots = "--tls_roots";
  const char* cert = "--tls_cert";
  const char* key = "--tls_key";
};
absl::Status ReadTlsFiles(const std::string& roots_path, const std::string& cert_path,
                          const std::string& key_path, ClientOptions& options,
                          const TlsFlagNames& flags = {});

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  explicit Client(std::shared_ptr<grpc::Channel> channel);
  ~Client();

  // Builds the wire request once (callers replaying the same rows reuse it).
  static v1::SelectRequest MakeRequest(int32_t k, const Rows& rows, const CallOptions& options);

  // Unary Select: the request must fit one message. A request built by a
  // RegionSession may be sent on any client (it names its session).
  absl::StatusOr<SelectResult> Select(int32_t k, const Rows& rows, const CallOptions& options = {});
  absl::StatusOr<SelectResult> Select(const v1::SelectRequest& request,
                                      const CallOptions& options = {});

  // SelectStream: rows sent in chunks of about `chunk_bytes` score bytes, so
  // no message bounds the batch.
  absl::StatusOr<SelectResult> SelectStreaming(int32_t k, const Rows& rows,
                                               const CallOptions& options = {},
                                               size_t chunk_bytes = kDefaultChunkBytes);

  // Asynchronous unary Select: returns at once; `done` runs on a gRPC thread
  // when the answer (or error) arrives. Any number may be in flight.
  using Callback = std::function<void(absl::StatusOr<SelectResult>)>;
  void SelectAsync(std::shared_ptr<const v1::SelectRequest> request, const CallOptions& options,
                   Callback done);

  absl::StatusOr<v1::ServerInfo> GetServerInfo();
  absl::StatusOr<v1::Stats> GetStats(bool include_prometheus_text = false);
  // Echo (servers with --enable_echo); response_bytes > 0 trims the answer.
  absl::StatusOr<std::string> Echo(std::string payload, int64_t response_bytes = 0);

  // grpc.health.v1 Check of `service` ("" is the whole server).
  absl::StatusOr<bool> IsServing(const std::string& service = "topk.v1.TopK");
  // Polls health until SERVING or the timeout.
  absl::Status WaitForServing(absl::Duration timeout, const std::string& service = "topk.v1.TopK");

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::TopK::Stub> stub_;
};

// Decodes a response into a result (checks that the byte counts match).
absl::StatusOr<SelectResult> DecodeResponse(const v1::SelectResponse& response);
// The same for a request whose output was by reference (RegionOutput): the
// result carries shape and timings, and no indices (they are in the region).
absl::StatusOr<SelectResult> DecodeReferenceResponse(const v1::SelectResponse& response);

}  // namespace topk::client
