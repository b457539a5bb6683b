#include "server/transport/select_reactors.h"

#include <bit>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/engine/clock.h"
#include "server/transport/raw_select.h"
#include "server/transport/validate.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; a big-endian host needs byte swaps here");

// Counts a failed request and produces its RPC status. A device failure that
// left no usable device is reported once more, for health.
grpc::Status Fail(const SelectContext& select, const absl::Status& status) {
  select.metrics->OnError(status.code());
  if (absl::IsUnavailable(status) && !select.engine->usable() && select.on_no_usable_device) {
    select.on_no_usable_device();
  }
  return ToGrpcStatus(status);
}

// What both reactors do when the engine is done with their job: encode, count,
// and produce the RPC's status.
grpc::Status FinishSelect(const SelectContext& select, const absl::Status& status,
                          const SelectOutput& output, const SelectInput& input, int64_t start_us,
                          const std::string& request_id, v1::SelectResponse& response) {
  if (!status.ok()) {
    spdlog::debug("select{} failed: {}", request_id.empty() ? "" : " " + request_id,
                  status.ToString());
    return Fail(select, status);
  }
  const int64_t rows = RowCount(input);
  const int64_t bytes_out =
      EncodeResponse(output, input.k, rows, SteadyNowUs() - start_us, response);
  response.set_request_id(request_id);
  select.metrics->OnSuccess(rows, bytes_out, output.timings.queue_us, output.timings.device_us,
                            response.timings().total_us());
  return grpc::Status::OK;
}

SelectOptions ToOptions(const v1::SelectOptions& options) {
  return SelectOptions{.sorted = options.sorted(), .deterministic = options.deterministic()};
}

class UnarySelect final : public grpc::ServerUnaryReactor, public SelectJob {
 public:
  UnarySelect(const SelectContext& select, grpc::CallbackServerContext* context,
              const grpc::ByteBuffer* request, grpc::ByteBuffer* response)
      : select_(select), context_(context), request_(request), response_(response) {}

  void Start() {
    start_us_ = SteadyNowUs();  // before decoding: total_us includes it
    const RequestLimits& limits = select_.engine->limits();
    // The decoder stores at most max_rows + 1 lengths: enough to refuse.
    absl::Status parsed = ParseRawSelect(*request_, static_cast<size_t>(limits.max_rows), raw_);
    select_.metrics->OnRequest(raw_.scores_size);
    if (!parsed.ok()) {
      Finish(Fail(select_, parsed));
      return;
    }
    if (raw_.references_regions) {
      StartByReference();
      return;
    }
    if (!raw_.has_inline_rows) {
      Finish(Fail(select_, absl::InvalidArgumentError("rows: no rows given (set inline_rows)")));
      return;
    }
    absl::StatusOr<int32_t> longest = ValidateSelect(raw_.k, raw_.num_lengths, raw_.lengths,
                                                     static_cast<size_t>(raw_.scores_size), limits);
    if (!longest.ok()) {
      Finish(Fail(select_, longest.status()));
      return;
    }
    // The scores stay in gRPC's receive buffer; the backend copies them once.
    rows_.emplace(request_, raw_.scores_offset, raw_.scores_size);
    input_ = SelectInput{.k = raw_.k,
                         .options = ToOptions(raw_.options),
                         .return_values = raw_.options.return_values(),
                         .lengths = raw_.lengths,
                         .rows = &*rows_,
                         .max_length = *longest};
    select_.engine->Submit(this);  // `this` may be gone once Submit returns
  }

  const SelectInput& input() const override { return input_; }
  bool IsCancelled() const override { return context_->IsCancelled(); }

  void Complete(const absl::Status& status, const SelectOutput& output) override {
    grpc::Status result =
        FinishSelect(select_, status, output, input_, start_us_, raw_.request_id, message_);
    if (result.ok()) {
      bool own_buffer = false;
      result = grpc::SerializationTraits<v1::SelectResponse>::Serialize(message_, response_,
                                                                        &own_buffer);
    }
    Finish(result);
  }

  void OnDone() override { delete this; }

 private:
  // Rows, lengths or output in regions: bound (and checked) by the region
  // service; the job then holds leases on them until it is done.
  void StartByReference() {
    if (raw_.has_inline_rows) rows_.emplace(request_, raw_.scores_offset, raw_.scores_size);
    absl::StatusOr<SelectInput> input = select_.regions->BindSelect(
        context_, raw_, rows_.has_value() ? &*rows_ : nullptr, regions_);
    if (!input.ok()) {
      Finish(Fail(select_, input.status()));
      return;
    }
    input_ = *input;
    select_.engine->Submit(this);  // `this` may be gone once Submit returns
  }

  const SelectContext& select_;
  grpc::CallbackServerContext* context_;
  const grpc::ByteBuffer* request_;
  grpc::ByteBuffer* response_;
  RawSelectRequest raw_;
  std::optional<ByteBufferRows> rows_;
  RegionBinding regions_;
  v1::SelectResponse message_;
  SelectInput input_;
  int64_t start_us_ = 0;
};

class StreamSelect final : public grpc::ServerReadReactor<v1::SelectChunk>, public SelectJob {
 public:
  StreamSelect(const SelectContext& select, grpc::CallbackServerContext* context,
               v1::SelectResponse* response)
      : select_(select), context_(context), response_(response) {}

  void Start() { StartRead(&chunk_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (all chunks are in) or the call died.
      Submit();
      return;
    }
    const RequestLimits& limits = select_.engine->limits();
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
    absl::Status within =
        CheckRowCount(static_cast<int64_t>(lengths_.size()) + chunk_.lengths_size(), limits);
    if (within.ok()) {
      within = CheckReceivedScoreBytes(
          static_cast<int64_t>(scores_.size() + chunk_.scores().size()), limits);
    }
    if (!within.ok()) {
      FailNow(absl::Status(within.code(),
                           absl::StrCat(within.message(), " (chunk ", chunks_ - 1, ")")));
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
    Finish(FinishSelect(select_, status, output, input_, start_us_, request_id_, *response_));
  }

  void OnDone() override { delete this; }

 private:
  void Submit() {
    start_us_ = SteadyNowUs();
    select_.metrics->OnRequest(static_cast<int64_t>(scores_.size()));
    if (context_->IsCancelled()) {
      FailNow(absl::CancelledError("the client cancelled the stream"));
      return;
    }
    absl::StatusOr<int32_t> longest =
        ValidateSelect(k_, static_cast<int64_t>(lengths_.size()), lengths_, scores_.size(),
                       select_.engine->limits());
    if (!longest.ok()) {
      FailNow(longest.status());
      return;
    }
    rows_.emplace(scores_);
    input_ = SelectInput{.k = k_,
                         .options = ToOptions(options_),
                         .return_values = options_.return_values(),
                         .lengths = lengths_,
                         .rows = &*rows_,
                         .max_length = *longest};
    select_.engine->Submit(this);  // `this` may be gone once Submit returns
  }

  void FailNow(const absl::Status& status) { Finish(Fail(select_, status)); }

  const SelectContext& select_;
  grpc::CallbackServerContext* context_;
  v1::SelectResponse* response_;
  v1::SelectChunk chunk_;
  int64_t chunks_ = 0;
  int32_t k_ = 0;
  v1::SelectOptions options_;
  std::string request_id_;
  std::vector<int32_t> lengths_;
  std::string scores_;  // the chunks' scores, back to back
  std::optional<ContiguousRows> rows_;
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

grpc::ServerUnaryReactor* StartUnarySelect(const SelectContext& select,
                                           grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) {
  // gRPC's callback API owns reactors by convention: each deletes itself in
  // OnDone, the one point after which gRPC never touches it again.
  auto* reactor = new UnarySelect(select, context, request, response);
  reactor->Start();
  return reactor;
}

grpc::ServerReadReactor<v1::SelectChunk>* StartStreamSelect(const SelectContext& select,
                                                            grpc::CallbackServerContext* context,
                                                            v1::SelectResponse* response) {
  auto* reactor = new StreamSelect(select, context, response);
  reactor->Start();
  return reactor;
}

}  // namespace topk::server
