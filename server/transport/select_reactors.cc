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
#include "server/transport/score_dtype.h"
#include "server/transport/select_common.h"
#include "server/transport/validate.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; a big-endian host needs byte swaps here");

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
    if (absl::Status prepared = PrepareSelect(select_, context_, request_, prepared_);
        !prepared.ok()) {
      FailNow(prepared);
      return;
    }
    submitted_us_ = SteadyNowUs();
    select_.engine->Submit(this);  // `this` may be gone once Submit returns
  }

  const SelectInput& input() const override { return prepared_.input; }
  bool IsCancelled() const override { return context_->IsCancelled(); }

  void Complete(const absl::Status& status, const SelectOutput& output) override {
    grpc::Status result = FinishSelect(
        select_, status.ok() ? CheckNoFaults(prepared_.regions) : status, output, prepared_.input,
        start_us_, submitted_us_, prepared_.raw.request_id, message_, outcome_);
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
  void FailNow(const absl::Status& status) {
    const grpc::Status result = Fail(select_, status, prepared_.raw.request_id, outcome_);
    Record(select_, outcome_);
    Finish(result);
  }

  const SelectContext& select_;
  grpc::CallbackServerContext* context_;
  const grpc::ByteBuffer* request_;
  grpc::ByteBuffer* response_;
  bool began_ = false;
  int64_t reserved_bytes_ = 0;
  PreparedSelect prepared_;
  v1::SelectResponse message_;
  Outcome outcome_;
  int64_t start_us_ = 0;
  int64_t submitted_us_ = 0;
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
    grpc::Status result = FinishSelect(select_, status, output, input_, start_us_, start_us_,
                                       request_id_, message_, outcome_);
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
      absl::StatusOr<ScoreType> dtype = ScoreTypeFromWire(chunk.dtype(), "dtype");
      if (!dtype.ok()) return dtype.status();
      dtype_ = *dtype;
    } else if (chunk.dtype() != v1::SCORE_TYPE_FP32 && chunk.dtype() != ScoreTypeToWire(dtype_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype = ", chunk.dtype(), " differs from the first chunk's ", ScoreTypeToWire(dtype_),
          " (", std::string(ScoreTypeName(dtype_)), "; leave it unset or equal)"));
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
                       select_.engine->limits(), dtype_);
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
                         .max_length = *longest,
                         .dtype = dtype_};
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
  ScoreType dtype_ = ScoreType::kFloat32;
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
    value_bytes = output.values.size();  // already in the request's type
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
