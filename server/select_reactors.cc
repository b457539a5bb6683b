#include "server/select_reactors.h"

#include <bit>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/engine/worker.h"
#include "server/raw_select.h"
#include "server/service.h"
#include "server/validate.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; a big-endian host needs byte swaps here");

// What both reactors do when the engine is done with their job: encode, count,
// and produce the RPC's status.
grpc::Status FinishSelect(TopKService& service, const absl::Status& status,
                          const SelectOutput& output, const SelectInput& input, int64_t start_us,
                          const std::string& request_id, v1::SelectResponse& response) {
  if (!status.ok()) {
    service.NoteFailure(status);
    spdlog::debug("select{} failed: {}", request_id.empty() ? "" : " " + request_id,
                  status.ToString());
    return ToGrpcStatus(status);
  }
  const auto rows = static_cast<int64_t>(input.lengths.size());
  const int64_t bytes_out =
      EncodeResponse(output, input.k, rows, SteadyNowUs() - start_us, response);
  response.set_request_id(request_id);
  service.metrics().OnSuccess(rows, bytes_out, output.timings.queue_us, output.timings.device_us,
                              response.timings().total_us());
  return grpc::Status::OK;
}

SelectOptions ToOptions(const v1::SelectOptions& options) {
  return SelectOptions{.sorted = options.sorted(), .deterministic = options.deterministic()};
}

class UnarySelect final : public grpc::ServerUnaryReactor, public SelectJob {
 public:
  UnarySelect(TopKService& service, grpc::CallbackServerContext* context,
              const grpc::ByteBuffer* request, grpc::ByteBuffer* response)
      : service_(service), context_(context), request_(request), response_(response) {}

  void Start() {
    start_us_ = SteadyNowUs();  // before decoding: total_us includes it
    const EngineLimits& limits = service_.engine().limits();
    absl::Status parsed = ParseRawSelect(*request_, static_cast<size_t>(limits.max_rows), raw_);
    service_.metrics().OnRequest(raw_.scores_size);
    if (!parsed.ok()) {
      Finish(Fail(parsed));
      return;
    }
    if (!raw_.has_inline_rows) {
      Finish(Fail(absl::InvalidArgumentError("rows: no rows given (set inline_rows)")));
      return;
    }
    if (raw_.num_lengths > limits.max_rows) {
      Finish(Fail(absl::InvalidArgumentError(absl::StrCat(
          "lengths: ", raw_.num_lengths, " rows exceed max_rows = ", limits.max_rows))));
      return;
    }
    absl::StatusOr<int32_t> longest =
        ValidateSelect(raw_.k, raw_.lengths, static_cast<size_t>(raw_.scores_size), limits);
    if (!longest.ok()) {
      Finish(Fail(longest.status()));
      return;
    }
    scores_.emplace(request_, raw_.scores_offset, raw_.scores_size);
    input_ = SelectInput{.k = raw_.k,
                         .options = ToOptions(raw_.options),
                         .return_values = raw_.options.return_values(),
                         .lengths = raw_.lengths,
                         .source = &*scores_,
                         .max_length = *longest};
    if (!service_.engine().stages_scores()) {
      // Host backends read the scores in place: make them contiguous here, on
      // the gRPC thread, so the copy overlaps the workers' selections (what
      // protobuf's decoder would do, without its zero-fill).
      contiguous_ = std::make_unique_for_overwrite<char[]>(scores_->size());
      scores_->CopyTo(contiguous_.get());
      input_.scores = absl::string_view(contiguous_.get(), scores_->size());
      input_.source = nullptr;
    }
    service_.engine().Submit(this);  // `this` may be gone once Submit returns
  }

  const SelectInput& input() const override { return input_; }
  bool IsCancelled() const override { return context_->IsCancelled(); }

  void Complete(const absl::Status& status, const SelectOutput& output) override {
    grpc::Status result =
        FinishSelect(service_, status, output, input_, start_us_, raw_.request_id, message_);
    if (result.ok()) {
      bool own_buffer = false;
      result = grpc::SerializationTraits<v1::SelectResponse>::Serialize(message_, response_,
                                                                        &own_buffer);
    }
    Finish(result);
  }

  void OnDone() override { delete this; }

 private:
  grpc::Status Fail(const absl::Status& status) {
    service_.NoteFailure(status);
    return ToGrpcStatus(status);
  }

  TopKService& service_;
  grpc::CallbackServerContext* context_;
  const grpc::ByteBuffer* request_;
  grpc::ByteBuffer* response_;
  RawSelectRequest raw_;
  std::optional<ByteBufferScores> scores_;
  std::unique_ptr<char[]> contiguous_;  // host backends only
  v1::SelectResponse message_;
  SelectInput input_;
  int64_t start_us_ = 0;
};

class StreamSelect final : public grpc::ServerReadReactor<v1::SelectChunk>, public SelectJob {
 public:
  StreamSelect(TopKService& service, grpc::CallbackServerContext* context,
               v1::SelectResponse* response)
      : service_(service), context_(context), response_(response) {}

  void Start() { StartRead(&chunk_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (all chunks are in) or the call died.
      Submit();
      return;
    }
    const EngineLimits& limits = service_.engine().limits();
    if (chunks_++ == 0) {
      k_ = chunk_.k();
      options_ = chunk_.options();
      request_id_ = chunk_.request_id();
    } else if ((chunk_.k() != 0 && chunk_.k() != k_) || chunk_.has_options()) {
      FailNow(absl::InvalidArgumentError(
          absl::StrCat("chunk ", chunks_ - 1, ": k and options belong to the first chunk only")));
      return;
    }
    // Check the limits as chunks arrive, so a runaway stream is cut off
    // before it fills memory.
    if (static_cast<int64_t>(lengths_.size()) + chunk_.lengths_size() > limits.max_rows) {
      FailNow(absl::InvalidArgumentError(absl::StrCat(
          "lengths: more than max_rows = ", limits.max_rows, " rows (chunk ", chunks_ - 1, ")")));
      return;
    }
    if (static_cast<int64_t>(scores_.size() + chunk_.scores().size()) > limits.max_batch_bytes) {
      FailNow(absl::InvalidArgumentError(
          absl::StrCat("scores: more than max_batch_bytes = ", limits.max_batch_bytes,
                       " bytes (chunk ", chunks_ - 1, ")")));
      return;
    }
    lengths_.insert(lengths_.end(), chunk_.lengths().begin(), chunk_.lengths().end());
    scores_.append(chunk_.scores());
    chunk_.Clear();
    StartRead(&chunk_);
  }

  const SelectInput& input() const override { return input_; }
  bool IsCancelled() const override { return context_->IsCancelled(); }

  void Complete(const absl::Status& status, const SelectOutput& output) override {
    Finish(FinishSelect(service_, status, output, input_, start_us_, request_id_, *response_));
  }

  void OnDone() override { delete this; }

 private:
  void Submit() {
    start_us_ = SteadyNowUs();
    service_.metrics().OnRequest(static_cast<int64_t>(scores_.size()));
    if (context_->IsCancelled()) {
      FailNow(absl::CancelledError("the client cancelled the stream"));
      return;
    }
    absl::StatusOr<int32_t> longest =
        ValidateSelect(k_, lengths_, scores_.size(), service_.engine().limits());
    if (!longest.ok()) {
      FailNow(longest.status());
      return;
    }
    input_ = SelectInput{.k = k_,
                         .options = ToOptions(options_),
                         .return_values = options_.return_values(),
                         .lengths = lengths_,
                         .scores = scores_,
                         .max_length = *longest};
    service_.engine().Submit(this);  // `this` may be gone once Submit returns
  }

  void FailNow(const absl::Status& status) {
    service_.NoteFailure(status);
    Finish(ToGrpcStatus(status));
  }

  TopKService& service_;
  grpc::CallbackServerContext* context_;
  v1::SelectResponse* response_;
  v1::SelectChunk chunk_;
  int64_t chunks_ = 0;
  int32_t k_ = 0;
  v1::SelectOptions options_;
  std::string request_id_;
  std::vector<int32_t> lengths_;
  std::string scores_;
  SelectInput input_;
  int64_t start_us_ = 0;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

int64_t EncodeResponse(const SelectOutput& output, int32_t k, int64_t rows, int64_t total_us,
                       v1::SelectResponse& response) {
  response.set_num_rows(static_cast<int32_t>(rows));
  response.set_k(k);
  const size_t index_bytes = output.indices.size() * sizeof(int32_t);
  response.mutable_indices()->assign(reinterpret_cast<const char*>(output.indices.data()),
                                     index_bytes);
  size_t value_bytes = 0;
  if (!output.values.empty()) {
    value_bytes = output.values.size() * sizeof(float);
    response.mutable_values()->assign(reinterpret_cast<const char*>(output.values.data()),
                                      value_bytes);
  }
  v1::Timings* timings = response.mutable_timings();
  timings->set_queue_us(output.timings.queue_us);
  timings->set_device_us(output.timings.device_us);
  timings->set_total_us(total_us);
  return static_cast<int64_t>(index_bytes + value_bytes);
}

grpc::ServerUnaryReactor* StartUnarySelect(TopKService& service,
                                           grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) {
  // gRPC's callback API owns reactors by convention: each deletes itself in
  // OnDone, the one point after which gRPC never touches it again.
  auto* reactor = new UnarySelect(service, context, request, response);
  reactor->Start();
  return reactor;
}

grpc::ServerReadReactor<v1::SelectChunk>* StartStreamSelect(TopKService& service,
                                                            grpc::CallbackServerContext* context,
                                                            v1::SelectResponse* response) {
  auto* reactor = new StreamSelect(service, context, response);
  reactor->Start();
  return reactor;
}

}  // namespace topk::server
