#include "server/transport/select_reactors.h"

#include <atomic>
#include <bit>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/clock.h"
#include "server/transport/raw_messages.h"
#include "server/transport/raw_select.h"
#include "server/transport/validate.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; a big-endian host needs byte swaps here");

// How one call ended: what its reactor counts, once.
struct Outcome {
  absl::StatusCode code = absl::StatusCode::kOk;
  int64_t rows = 0;
  int64_t bytes_out = 0;
  SelectTimings timings;
  int64_t total_us = 0;
};

void Record(const SelectContext& select, const Outcome& outcome) {
  if (outcome.code != absl::StatusCode::kOk) {
    select.metrics->OnError(outcome.code);
    return;
  }
  select.metrics->OnSuccess(outcome.rows, outcome.bytes_out, outcome.timings.queue_us,
                            outcome.timings.device_us, outcome.total_us);
}

// Logs a failed request (debug), notes its code in `outcome` and produces its
// RPC status. A device failure that left no usable device is reported once
// more, for health.
grpc::Status Fail(const SelectContext& select, const absl::Status& status,
                  const std::string& request_id, Outcome& outcome) {
  spdlog::debug("select{} failed: {}", request_id.empty() ? "" : " " + request_id,
                status.ToString());
  outcome.code = status.code();
  if (absl::IsUnavailable(status) && !select.engine->usable() && select.on_no_usable_device) {
    select.on_no_usable_device();
  }
  return ToGrpcStatus(status);
}

// What both reactors do when the engine is done with their job: encode,
// refuse an answer gRPC could not send, and produce the RPC's status.
grpc::Status FinishSelect(const SelectContext& select, const absl::Status& status,
                          const SelectOutput& output, const SelectInput& input, int64_t start_us,
                          const std::string& request_id, v1::SelectResponse& response,
                          Outcome& outcome) {
  if (!status.ok()) return Fail(select, status, request_id, outcome);
  const int64_t rows = RowCount(input);
  const int64_t bytes_out =
      EncodeResponse(output, input.k, rows, SteadyNowUs() - start_us, response);
  response.set_request_id(request_id);
  const auto size = static_cast<int64_t>(response.ByteSizeLong());
  if (select.max_send_message_bytes > 0 && size > select.max_send_message_bytes) {
    response.Clear();
    return Fail(select,
                absl::ResourceExhaustedError(absl::StrCat(
                    "response: ", size, " bytes (", rows, " rows x k = ", input.k,
                    input.return_values ? " x 8 with values" : " x 4",
                    ") exceed --max_send_message_bytes = ", select.max_send_message_bytes,
                    "; send fewer rows per request or a smaller k")),
                request_id, outcome);
  }
  outcome = Outcome{.rows = rows,
                    .bytes_out = bytes_out,
                    .timings = output.timings,
                    .total_us = response.timings().total_us()};
  spdlog::debug("select{} ok: {} rows, k = {}, {} us (queue {}, device {})",
                request_id.empty() ? "" : " " + request_id, rows, input.k, outcome.total_us,
                output.timings.queue_us, output.timings.device_us);
  return grpc::Status::OK;
}

SelectOptions ToOptions(const v1::SelectOptions& options) {
  return SelectOptions{.sorted = options.sorted(), .deterministic = options.deterministic()};
}

absl::Status ClientGone() {
  return absl::CancelledError(
      "the client cancelled the call or its deadline passed before the request arrived");
}

class UnarySelect final : public grpc::ServerUnaryReactor, public SelectJob {
 public:
  UnarySelect(const SelectContext& select, grpc::CallbackServerContext* context,
              const grpc::ByteBuffer* request, grpc::ByteBuffer* response)
      : select_(select), context_(context), request_(request), response_(response) {}

  void Start() {
    start_us_ = SteadyNowUs();  // before decoding: total_us includes it
    select_.metrics->OnRequest();
    // gRPC runs the handler without a message (not even an empty one) when
    // the call died while its message was still arriving: that is the
    // client's cancel or deadline, not a malformed request.
    if (!request_->Valid() || context_->IsCancelled()) {
      FailNow(ClientGone());
      return;
    }
    const auto bytes = static_cast<int64_t>(request_->Length());
    if (absl::Status admitted = select_.calls->BeginCall(bytes); !admitted.ok()) {
      FailNow(admitted);
      return;
    }
    began_ = true;
    if (absl::Status fits = select_.calls->ReserveBytes(bytes); !fits.ok()) {
      FailNow(fits);
      return;
    }
    reserved_bytes_ = bytes;
    const RequestLimits& limits = select_.engine->limits();
    // The decoder stores at most max_rows + 1 lengths: enough to refuse.
    absl::Status parsed = ParseRawSelect(*request_, static_cast<size_t>(limits.max_rows), raw_);
    select_.metrics->OnBytesIn(raw_.scores_size);
    if (!parsed.ok()) {
      FailNow(parsed);
      return;
    }
    if (raw_.references_regions) {
      StartByReference();
      return;
    }
    if (!raw_.has_inline_rows) {
      FailNow(absl::InvalidArgumentError("rows: no rows given (set inline_rows)"));
      return;
    }
    absl::StatusOr<int32_t> longest = ValidateSelect(raw_.k, raw_.num_lengths, raw_.lengths,
                                                     static_cast<size_t>(raw_.scores_size), limits);
    if (!longest.ok()) {
      FailNow(longest.status());
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
    grpc::Status result = FinishSelect(select_, status, output, input_, start_us_, raw_.request_id,
                                       message_, outcome_);
    if (result.ok()) result = ToGrpcStatus(SerializeMessage(message_, *response_));
    Record(select_, outcome_);  // before the client can see the answer
    Finish(result);
  }

  void OnDone() override {
    if (reserved_bytes_ > 0) select_.calls->ReleaseBytes(reserved_bytes_);
    if (began_) select_.calls->EndCall();
    delete this;
  }

 private:
  // Rows, lengths or output in regions: bound (and checked) by the region
  // service; the job then holds leases on them until it is done.
  void StartByReference() {
    if (raw_.has_inline_rows) rows_.emplace(request_, raw_.scores_offset, raw_.scores_size);
    absl::StatusOr<SelectInput> input = select_.regions->BindSelect(
        context_, raw_, rows_.has_value() ? &*rows_ : nullptr, regions_);
    if (!input.ok()) {
      FailNow(input.status());
      return;
    }
    input_ = *input;
    select_.engine->Submit(this);  // `this` may be gone once Submit returns
  }

  void FailNow(const absl::Status& status) {
    const grpc::Status result = Fail(select_, status, raw_.request_id, outcome_);
    Record(select_, outcome_);
    Finish(result);
  }

  const SelectContext& select_;
  grpc::CallbackServerContext* context_;
  const grpc::ByteBuffer* request_;
  grpc::ByteBuffer* response_;
  bool began_ = false;
  int64_t reserved_bytes_ = 0;
  RawSelectRequest raw_;
  std::optional<ByteBufferRows> rows_;
  RegionBinding regions_;
  v1::SelectResponse message_;
  SelectInput input_;
  Outcome outcome_;
  int64_t start_us_ = 0;
};

// One SelectStream. Chunks arrive as raw bytes and are parsed here. The call
// tracker may end an idle stream from its own thread (Expire), so the points
// that finish the call agree under mu_ on who finishes it, once.
class StreamSelect final : public grpc::ServerReadReactor<grpc::ByteBuffer>,
                           public SelectJob,
                           public TrackedStream {
 public:
  StreamSelect(const SelectContext& select, grpc::CallbackServerContext* context,
               grpc::ByteBuffer* response)
      : select_(select), context_(context), response_(response) {}

  void Start() {
    select_.metrics->OnRequest();
    if (absl::Status admitted = select_.calls->BeginStream(this); !admitted.ok()) {
      Finish(Fail(select_, admitted, "", outcome_));
      return;
    }
    tracked_ = true;
    {
      absl::MutexLock lock(&mu_);
      last_activity_ = absl::Now();
    }
    StartRead(&buffer_);
  }

  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (!ok) {
      // The client half-closed (all chunks are in) or the call died; a
      // chunk that does not parse never gets here (it is raw bytes).
      finished_by_submit_ = true;
      last_activity_ = absl::InfinitePast();
      Submit();
      return;
    }
    last_activity_ = absl::Now();
    const int64_t chunk_index = chunks_++;
    if (absl::Status s = TakeChunk(chunk_index); !s.ok()) {
      FinishLocked(absl::Status(s.code(), absl::StrCat("chunk ", chunk_index, ": ", s.message())));
      return;
    }
    StartRead(&buffer_);
  }

  const SelectInput& input() const override { return input_; }
  bool IsCancelled() const override { return context_->IsCancelled(); }

  void Complete(const absl::Status& status, const SelectOutput& output) override {
    grpc::Status result =
        FinishSelect(select_, status, output, input_, start_us_, request_id_, message_, outcome_);
    if (result.ok()) result = ToGrpcStatus(SerializeMessage(message_, *response_));
    Finish(result);
  }

  void OnCancel() override { cancelled_.store(true, std::memory_order_release); }

  // TrackedStream
  absl::Time last_activity() const override {
    absl::MutexLock lock(&mu_);
    return last_activity_;
  }
  void Expire(const absl::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || finished_by_submit_) return;
      finished_ = true;
    }
    spdlog::debug("select stream{} ended: {}", request_id_.empty() ? "" : " " + request_id_,
                  status.ToString());
    Finish(Fail(select_, status, request_id_, outcome_));  // outside mu_: may run OnReadDone inline
  }
  void Ref() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() override {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void OnDone() override {
    if (cancelled_.load(std::memory_order_acquire))
      outcome_ = Outcome{.code = absl::StatusCode::kCancelled};
    Record(select_, outcome_);
    if (reserved_bytes_ > 0) select_.calls->ReleaseBytes(reserved_bytes_);
    if (tracked_) select_.calls->EndStream(this);
    Unref();
  }

 private:
  // Parses and checks chunk `index` (in buffer_) and appends its rows.
  absl::Status TakeChunk(int64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const CallLimits& call_limits = select_.calls->limits();
    if (call_limits.max_stream_chunks > 0 && index >= call_limits.max_stream_chunks) {
      return absl::ResourceExhaustedError(
          absl::StrCat("more than --max_stream_chunks = ", call_limits.max_stream_chunks,
                       " chunks; send larger chunks"));
    }
    const auto bytes = static_cast<int64_t>(buffer_.Length());
    if (absl::Status fits = select_.calls->ReserveBytes(bytes); !fits.ok()) return fits;
    reserved_bytes_ += bytes;
    v1::SelectChunk chunk;
    absl::Status parsed = ParseMessage(buffer_, chunk);
    buffer_.Clear();
    if (!parsed.ok()) return parsed;
    if (index == 0) {
      k_ = chunk.k();
      options_ = chunk.options();
      request_id_ = chunk.request_id();
    } else if ((chunk.k() != 0 && chunk.k() != k_) || chunk.has_options()) {
      return absl::InvalidArgumentError("k and options belong to the first chunk only");
    } else if (!chunk.request_id().empty() && chunk.request_id() != request_id_) {
      return absl::InvalidArgumentError(absl::StrCat("request_id '", chunk.request_id(),
                                                     "' differs from the first chunk's '",
                                                     request_id_, "' (leave it unset or equal)"));
    }
    // Check the limits as chunks arrive, so a runaway stream is cut off
    // before it fills memory.
    const RequestLimits& limits = select_.engine->limits();
    absl::Status within =
        CheckRowCount(static_cast<int64_t>(lengths_.size()) + chunk.lengths_size(), limits);
    if (within.ok()) {
      within = CheckReceivedScoreBytes(static_cast<int64_t>(scores_.size() + chunk.scores().size()),
                                       limits);
    }
    if (!within.ok()) return within;
    select_.metrics->OnBytesIn(static_cast<int64_t>(chunk.scores().size()));
    lengths_.insert(lengths_.end(), chunk.lengths().begin(), chunk.lengths().end());
    scores_.append(chunk.scores());
    return absl::OkStatus();
  }

  void Submit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    start_us_ = SteadyNowUs();
    if (context_->IsCancelled()) {
      Finish(Fail(select_, absl::CancelledError("the client cancelled the stream"), request_id_,
                  outcome_));
      return;
    }
    absl::StatusOr<int32_t> longest =
        ValidateSelect(k_, static_cast<int64_t>(lengths_.size()), lengths_, scores_.size(),
                       select_.engine->limits());
    if (!longest.ok()) {
      Finish(Fail(select_, longest.status(), request_id_, outcome_));
      return;
    }
    rows_.emplace(scores_);
    input_ = SelectInput{.k = k_,
                         .options = ToOptions(options_),
                         .return_values = options_.return_values(),
                         .lengths = lengths_,
                         .rows = &*rows_,
                         .max_length = *longest};
    select_.engine->Submit(this);  // completes on a worker; OnDone waits for Finish
  }

  void FinishLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finished_ = true;
    Finish(Fail(select_, status, request_id_, outcome_));
  }

  const SelectContext& select_;
  grpc::CallbackServerContext* context_;
  grpc::ByteBuffer* response_;
  grpc::ByteBuffer buffer_;  // the chunk being read
  bool tracked_ = false;
  std::atomic<int> refs_{1};
  std::atomic<bool> cancelled_{false};
  Outcome outcome_;  // gRPC's, until OnDone; the tracker's while it expires us
  mutable absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_by_submit_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_activity_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t reserved_bytes_ = 0;
  int64_t chunks_ = 0;
  int32_t k_ = 0;
  v1::SelectOptions options_;
  std::string request_id_;
  std::vector<int32_t> lengths_;
  std::string scores_;  // the chunks' scores, back to back
  std::optional<ContiguousRows> rows_;
  v1::SelectResponse message_;
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
  timings->set_batch_requests(output.timings.batch_requests);
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

grpc::ServerReadReactor<grpc::ByteBuffer>* StartStreamSelect(const SelectContext& select,
                                                             grpc::CallbackServerContext* context,
                                                             grpc::ByteBuffer* response) {
  auto* reactor = new StreamSelect(select, context, response);
  reactor->Start();
  return reactor;
}

}  // namespace topk::server
