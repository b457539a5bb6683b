#include "topk/client/client.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc_status.h"
#include "grpcpp/grpcpp.h"

namespace topk::client {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

void Prepare(grpc::ClientContext& context, const CallOptions& options) {
  if (options.timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  }
  context.set_wait_for_ready(!options.fail_fast);
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SetOptions(const CallOptions& options, v1::SelectOptions& out) {
  out.set_sorted(options.sorted);
  out.set_deterministic(options.deterministic);
  out.set_return_values(options.return_values);
}

// The channel's service config, or "" when the options ask for none. Names
// are checked, not escaped: a policy is a word, a service a dotted name.
absl::StatusOr<std::string> ServiceConfig(const ClientOptions& options) {
  auto plain = [](const std::string& name) {
    return std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
    });
  };
  if (!plain(options.load_balancing_policy)) {
    return absl::InvalidArgumentError(
        absl::StrCat("load_balancing_policy \"", options.load_balancing_policy,
                     "\": expected a policy name such as round_robin"));
  }
  if (!plain(options.health_check_service)) {
    return absl::InvalidArgumentError(
        absl::StrCat("health_check_service \"", options.health_check_service,
                     "\": expected a service name such as topk.v1.TopK"));
  }
  std::vector<std::string> fields;
  if (!options.load_balancing_policy.empty()) {
    fields.push_back(
        absl::StrCat(R"("loadBalancingConfig": [{")", options.load_balancing_policy, R"(": {}}])"));
  }
  if (!options.health_check_service.empty()) {
    fields.push_back(absl::StrCat(R"("healthCheckConfig": {"serviceName": ")",
                                  options.health_check_service, R"("})"));
  }
  if (fields.empty()) return std::string();
  return absl::StrCat("{", absl::StrJoin(fields, ", "), "}");
}

}  // namespace

absl::StatusOr<SelectResult> DecodeResponse(const v1::SelectResponse& response) {
  SelectResult result;
  result.num_rows = response.num_rows();
  result.k = response.k();
  const size_t count = static_cast<size_t>(result.num_rows) * static_cast<size_t>(result.k);
  if (response.indices().size() != count * sizeof(int32_t)) {
    return absl::DataLossError(absl::StrCat("response: ", response.indices().size(),
                                            " index bytes for ", result.num_rows, " x ", result.k));
  }
  result.indices.resize(count);
  std::memcpy(result.indices.data(), response.indices().data(), response.indices().size());
  if (!response.values().empty()) {
    result.values_dtype = response.values_dtype();
    const bool wide = result.values_dtype == v1::SCORE_TYPE_FP32;
    if (response.values().size() != count * (wide ? sizeof(float) : sizeof(uint16_t))) {
      return absl::DataLossError(absl::StrCat("response: value bytes do not match num_rows x k of ",
                                              v1::ScoreType_Name(result.values_dtype)));
    }
    if (wide) {
      result.values.resize(count);
      std::memcpy(result.values.data(), response.values().data(), response.values().size());
    } else {
      result.values16.resize(count);
      std::memcpy(result.values16.data(), response.values().data(), response.values().size());
    }
  }
  result.server = {.queue_us = response.timings().queue_us(),
                   .device_us = response.timings().device_us(),
                   .total_us = response.timings().total_us(),
                   .batch_requests = response.timings().batch_requests(),
                   .prepare_us = response.timings().prepare_us()};
  return result;
}

absl::StatusOr<SelectResult> DecodeReferenceResponse(const v1::SelectResponse& response) {
  if (!response.indices().empty() || !response.values().empty()) {
    return absl::DataLossError("response: indices sent although the output is by reference");
  }
  SelectResult result{.num_rows = response.num_rows(), .k = response.k()};
  result.server = {.queue_us = response.timings().queue_us(),
                   .device_us = response.timings().device_us(),
                   .total_us = response.timings().total_us(),
                   .batch_requests = response.timings().batch_requests(),
                   .prepare_us = response.timings().prepare_us()};
  return result;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ClientOptions& options) {
  if (!options.tls) return grpc::InsecureChannelCredentials();
  if (options.client_cert_pem.empty() != options.client_key_pem.empty()) {
    return absl::InvalidArgumentError(
        "the client certificate and its private key go together (set both or neither)");
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = options.root_certs_pem;
  ssl.pem_cert_chain = options.client_cert_pem;
  ssl.pem_private_key = options.client_key_pem;
  return grpc::SslCredentials(ssl);
}

absl::Status ReadTlsFiles(const std::string& roots_path, const std::string& cert_path,
                          const std::string& key_path, ClientOptions& options,
                          const TlsFlagNames& flags) {
  const struct {
    const std::string& path;
    const char* flag;
    std::string& into;
  } files[] = {{roots_path, flags.roots, options.root_certs_pem},
               {cert_path, flags.cert, options.client_cert_pem},
               {key_path, flags.key, options.client_key_pem}};
  for (const auto& file : files) {
    if (file.path.empty()) continue;
    std::ifstream in(file.path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat(file.flag, ": cannot read ", file.path));
    file.into.assign(std::istreambuf_iterator<char>(in), {});
    options.tls = true;
  }
  if (cert_path.empty() != key_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.cert, " and ", flags.key, " go together (the client's certificate)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> made = ChannelCredentials(options);
  if (!made.ok()) return made.status();
  std::shared_ptr<grpc::ChannelCredentials> credentials = *std::move(made);
  grpc::ChannelArguments args;
  auto limit = [&](int64_t bytes) {
    return static_cast<int>(std::clamp<int64_t>(bytes > 0 ? bytes : options.max_message_bytes, 0,
                                                std::numeric_limits<int>::max()));
  };
  args.SetMaxReceiveMessageSize(limit(options.max_receive_message_bytes));
  args.SetMaxSendMessageSize(limit(options.max_send_message_bytes));
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  absl::StatusOr<std::string> service_config = ServiceConfig(options);
  if (!service_config.ok()) return service_config.status();
  if (!service_config->empty()) args.SetServiceConfigJSON(*service_config);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, credentials, args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to ", options.target));
  }
  return std::make_unique<Client>(std::move(channel));
}

Client::Client(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)), stub_(v1::TopK::NewStub(channel_)) {}

Client::~Client() = default;

v1::SelectRequest Client::MakeRequest(int32_t k, const Rows& rows, const CallOptions& options) {
  v1::SelectRequest request;
  request.set_k(k);
  SetOptions(options, *request.mutable_options());
  request.set_request_id(options.request_id);
  v1::InlineRows* inline_rows = request.mutable_inline_rows();
  inline_rows->mutable_lengths()->Add(rows.lengths.begin(), rows.lengths.end());
  const std::string_view bytes = ScoreBytes(rows);
  inline_rows->set_scores(bytes.data(), bytes.size());
  inline_rows->set_dtype(rows.dtype);
  return request;
}

std::string_view ScoreBytes(const Rows& rows) {
  if (rows.dtype != v1::SCORE_TYPE_FP32) {
    return {reinterpret_cast<const char*>(rows.scores16.data()),
            rows.scores16.size() * sizeof(uint16_t)};
  }
  return {reinterpret_cast<const char*>(rows.scores.data()), rows.scores.size() * sizeof(float)};
}

absl::StatusOr<SelectResult> Client::Select(int32_t k, const Rows& rows,
                                            const CallOptions& options) {
  return Select(MakeRequest(k, rows, options), options);
}

absl::StatusOr<SelectResult> Client::Select(const v1::SelectRequest& request,
                                            const CallOptions& options) {
  grpc::ClientContext context;
  Prepare(context, options);
  v1::SelectResponse response;
  const int64_t start = NowUs();
  const grpc::Status status = stub_->Select(&context, request, &response);
  const int64_t elapsed = NowUs() - start;
  if (!status.ok()) return ToAbsl(status);
  absl::StatusOr<SelectResult> result =
      request.has_output() ? DecodeReferenceResponse(response) : DecodeResponse(response);
  if (result.ok()) result->client_us = elapsed;
  return result;
}

absl::StatusOr<SelectResult> Client::SelectStreaming(int32_t k, const Rows& rows,
                                                     const CallOptions& options,
                                                     size_t chunk_bytes) {
  grpc::ClientContext context;
  Prepare(context, options);
  v1::SelectResponse response;
  const int64_t start = NowUs();
  std::unique_ptr<grpc::ClientWriter<v1::SelectChunk>> writer =
      stub_->SelectStream(&context, &response);
  // The server concatenates every chunk's lengths and every chunk's score
  // bytes, so both are simply cut into pieces of at most chunk_bytes.
  const size_t piece = std::max<size_t>(sizeof(float), chunk_bytes);
  const char* bytes = ScoreBytes(rows).data();
  const size_t total_bytes = ScoreBytes(rows).size();
  const size_t lengths_per_chunk = piece / sizeof(int32_t);
  size_t sent_bytes = 0;
  size_t sent_lengths = 0;
  bool first = true;
  while (first || sent_bytes < total_bytes || sent_lengths < rows.lengths.size()) {
    v1::SelectChunk chunk;
    if (first) {
      chunk.set_k(k);
      SetOptions(options, *chunk.mutable_options());
      chunk.set_request_id(options.request_id);
      chunk.set_dtype(rows.dtype);
      first = false;
    }
    const size_t n_lengths = std::min(lengths_per_chunk, rows.lengths.size() - sent_lengths);
    chunk.mutable_lengths()->Add(rows.lengths.begin() + sent_lengths,
                                 rows.lengths.begin() + sent_lengths + n_lengths);
    sent_lengths += n_lengths;
    const size_t n_bytes = std::min(piece, total_bytes - sent_bytes);
    chunk.set_scores(bytes + sent_bytes, n_bytes);
    sent_bytes += n_bytes;
    if (!writer->Write(chunk)) break;  // the server already answered (an error)
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  const int64_t elapsed = NowUs() - start;
  if (!status.ok()) return ToAbsl(status);
  absl::StatusOr<SelectResult> result = DecodeResponse(response);
  if (result.ok()) result->client_us = elapsed;
  return result;
}

void Client::SelectAsync(std::shared_ptr<const v1::SelectRequest> request,
                         const CallOptions& options, Callback done) {
  // Everything the call needs lives until its callback ran.
  struct Call {
    grpc::ClientContext context;
    std::shared_ptr<const v1::SelectRequest> request;
    v1::SelectResponse response;
    Callback done;
    int64_t start_us = 0;
  };
  auto call = std::make_shared<Call>();
  Prepare(call->context, options);
  call->request = std::move(request);
  call->done = std::move(done);
  call->start_us = NowUs();
  stub_->async()->Select(&call->context, call->request.get(), &call->response,
                         [call](grpc::Status status) {
                           const int64_t elapsed = NowUs() - call->start_us;
                           if (!status.ok()) {
                             call->done(ToAbsl(status));
                             return;
                           }
                           absl::StatusOr<SelectResult> result = DecodeResponse(call->response);
                           if (result.ok()) result->client_us = elapsed;
                           call->done(std::move(result));
                         });
}

absl::StatusOr<v1::ServerInfo> Client::GetServerInfo() {
  grpc::ClientContext context;
  v1::ServerInfo info;
  const grpc::Status status = stub_->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return ToAbsl(status);
  return info;
}

absl::StatusOr<v1::Stats> Client::GetStats(bool include_prometheus_text) {
  grpc::ClientContext context;
  v1::GetStatsRequest request;
  request.set_include_prometheus_text(include_prometheus_text);
  v1::Stats stats;
  const grpc::Status status = stub_->GetStats(&context, request, &stats);
  if (!status.ok()) return ToAbsl(status);
  return stats;
}

absl::StatusOr<std::string> Client::Echo(std::string payload, int64_t response_bytes) {
  grpc::ClientContext context;
  v1::EchoMessage request;
  request.set_payload(std::move(payload));
  request.set_response_bytes(response_bytes);
  v1::EchoMessage response;
  const grpc::Status status = stub_->Echo(&context, request, &response);
  if (!status.ok()) return ToAbsl(status);
  return std::move(*response.mutable_payload());
}

absl::StatusOr<bool> Client::IsServing(const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health->Check(&context, request, &response);
  if (!status.ok()) return ToAbsl(status);
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::Status Client::WaitForServing(absl::Duration timeout, const std::string& service) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("not SERVING yet");
  while (absl::Now() < deadline) {
    absl::StatusOr<bool> serving = IsServing(service);
    if (serving.ok() && *serving) return absl::OkStatus();
    last = serving.ok() ? absl::UnavailableError("health: NOT_SERVING") : serving.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "server not SERVING within ", absl::FormatDuration(timeout), ": ", last.ToString()));
}

}  // namespace topk::client
