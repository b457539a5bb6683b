#include "server/transport/select_pipeline.h"

#include <atomic>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/clock.h"
#include "server/transport/call_tracker.h"
#include "server/transport/raw_messages.h"
#include "server/transport/select_common.h"

namespace topk::server {
namespace {

class PipelineSelect;

// One request of a pipeline: a SelectJob of its own, holding its message,
// its leases and its share of the in-flight byte budget until it is
// answered. It hands its reply to the stream and deletes itself.
class PipelinedRequest final : public SelectJob {
 public:
  PipelinedRequest(PipelineSelect* stream, const SelectContext& select,
                   grpc::CallbackServerContext* context, grpc::ByteBuffer request)
      : stream_(stream), select_(select), context_(context), request_(std::move(request)) {}

  // On the thread that read the request (the stream's reads are sequential,
  // so `sessions` has one user at a time).
  void Start(SessionCache& sessions);
  const SelectInput& input() const override { return prepared_.input; }
  bool IsCancelled() const override { return context_->IsCancelled(); }
  void Complete(const absl::Status& status, const SelectOutput& output) override {
    v1::SelectReply reply;
    const grpc::Status result = FinishSelect(
        select_, status.ok() ? CheckNoFaults(prepared_.regions) : status, output, prepared_.input,
        start_us_, submitted_us_, prepared_.raw.request_id, *reply.mutable_response(), outcome_);
    Answer(result, reply);
  }

 private:
  void FailNow(const absl::Status& status) {
    v1::SelectReply reply;
    Answer(Fail(select_, status, prepared_.raw.request_id, outcome_), reply);
  }
  void Answer(const grpc::Status& result, v1::SelectReply& reply);

  PipelineSelect* stream_;
  const SelectContext& select_;
  grpc::CallbackServerContext* context_;
  grpc::ByteBuffer request_;
  int64_t reserved_bytes_ = 0;
  PreparedSelect prepared_;
  Outcome outcome_;
  int64_t start_us_ = 0;
  int64_t submitted_us_ = 0;
};

// The stream. Reads one request at a time (up to max_pipelined in flight),
// writes one reply at a time (the rest wait in order of completion). The
// call tracker may end an idle stream from its own thread (Expire), and
// requests complete on worker threads, so every decision to read, write or
// finish is taken under mu_ and carried out after it is released.
class PipelineSelect final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                             public TrackedStream {
 public:
  PipelineSelect(const SelectContext& select, grpc::CallbackServerContext* context)
      : select_(select), context_(context) {}

  void Start() {
    if (absl::Status admitted = select_.calls->BeginStream(this); !admitted.ok()) {
      select_.metrics->OnRequest();
      Outcome outcome;
      const grpc::Status refused = Fail(select_, admitted, "", outcome);
      Record(select_, outcome);
      Finish(refused);
      return;
    }
    tracked_ = true;
    {
      absl::MutexLock lock(&mu_);
      last_activity_ = absl::Now();
      reading_ = true;
    }
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
    grpc::ByteBuffer request;
    bool take = false;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      reading_ = false;
      if (ok && !finished_) {
        request.Swap(&read_buffer_);
        ++in_flight_;
        take = true;
      } else {
        // Half-closed by the client (or the call died): answer what is in
        // flight, then end.
        reads_done_ = true;
        finish = ShouldFinishLocked();
      }
    }
    if (!take) {
      if (finish) Finish(EndStatus());
      return;
    }
    Ref();  // the request's
    (new PipelinedRequest(this, select_, context_, std::move(request)))->Start(sessions_);
    bool read = false;
    {
      absl::MutexLock lock(&mu_);
      read = ShouldReadLocked();
    }
    if (read) StartRead(&read_buffer_);
  }

  // A request's reply (any thread).
  void OnAnswered(grpc::ByteBuffer reply) {
    grpc::ByteBuffer* write = nullptr;
    bool read = false;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      --in_flight_;
      if (in_flight_ == 0) last_activity_ = absl::Now();  // idle from here
      if (!broken_) {
        replies_.push_back(std::move(reply));
        if (!writing_) {
          writing_ = true;
          write = &replies_.front();
        }
      }
      read = ShouldReadLocked();
      finish = ShouldFinishLocked();
    }
    if (write != nullptr) StartWrite(write);
    if (read) StartRead(&read_buffer_);
    if (finish) Finish(EndStatus());
    Unref();  // the request's
  }

  void OnWriteDone(bool ok) override {
    grpc::ByteBuffer* next = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      replies_.pop_front();
      if (!ok) {
        // The client is gone: nothing more can reach it.
        broken_ = true;
        replies_.clear();
      }
      if (replies_.empty()) {
        writing_ = false;
      } else {
        next = &replies_.front();
      }
      finish = ShouldFinishLocked();
    }
    if (next != nullptr) StartWrite(next);
    if (finish) Finish(EndStatus());
  }

  void OnCancel() override { cancelled_.store(true, std::memory_order_release); }

  void OnDone() override {
    if (tracked_) select_.calls->EndStream(this);
    Unref();  // gRPC's
  }

  // TrackedStream: idle only while nothing is in flight or being written
  // and the client may still send.
  absl::Time last_activity() const override {
    absl::MutexLock lock(&mu_);
    if (in_flight_ > 0 || writing_ || reads_done_ || finished_) return absl::InfinitePast();
    return last_activity_;
  }
  void Expire(const absl::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || in_flight_ > 0 || writing_) return;
      finished_ = true;
    }
    Finish(ToGrpcStatus(status));
  }
  void Ref() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() override {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  bool ShouldReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reading_ || reads_done_ || finished_ || in_flight_ >= select_.max_pipelined) return false;
    reading_ = true;
    return true;
  }
  // Once: the client sent its last request and every reply is out.
  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !reads_done_ || reading_ || in_flight_ > 0 || writing_) return false;
    finished_ = true;
    return true;
  }
  grpc::Status EndStatus() const {
    if (cancelled_.load(std::memory_order_acquire)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream");
    }
    return grpc::Status::OK;
  }

  const SelectContext& select_;
  grpc::CallbackServerContext* context_;
  grpc::ByteBuffer read_buffer_;
  SessionCache sessions_;  // the last session a request named
  bool tracked_ = false;
  // gRPC's until OnDone, each request's until it is answered, the tracker's
  // while it expires the stream.
  std::atomic<int> refs_{1};
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Written in order; a deque keeps the one being written in place.
  std::deque<grpc::ByteBuffer> replies_ ABSL_GUARDED_BY(mu_);
  absl::Time last_activity_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

void PipelinedRequest::Start(SessionCache& sessions) {
  start_us_ = SteadyNowUs();  // before decoding: total_us includes it
  select_.metrics->OnRequest();
  if (context_->IsCancelled()) {
    FailNow(ClientGone());
    return;
  }
  const auto bytes = static_cast<int64_t>(request_.Length());
  // Lame duck: the grace a unary Select gets (a request the client sent
  // before the drain may be read after it); past it, UNAVAILABLE.
  if (absl::Status admitted = select_.calls->AdmitStreamedRequest(bytes); !admitted.ok()) {
    FailNow(admitted);
    return;
  }
  if (absl::Status fits = select_.calls->ReserveBytes(bytes); !fits.ok()) {
    FailNow(fits);
    return;
  }
  reserved_bytes_ = bytes;
  if (absl::Status prepared = PrepareSelect(select_, context_, &request_, prepared_, &sessions);
      !prepared.ok()) {
    FailNow(prepared);
    return;
  }
  submitted_us_ = SteadyNowUs();
  select_.engine->Submit(this);  // `this` may be gone once Submit returns
}

void PipelinedRequest::Answer(const grpc::Status& result, v1::SelectReply& reply) {
  reply.set_request_id(prepared_.raw.request_id);
  if (!result.ok()) {
    reply.clear_response();
    reply.set_code(static_cast<int32_t>(result.error_code()));
    reply.set_message(result.error_message());
  }
  grpc::ByteBuffer buffer;
  if (absl::Status encoded = SerializeMessage(reply, buffer); !encoded.ok()) {
    // Only a message over protobuf's 2 GiB bound gets here.
    outcome_ = Outcome{.code = encoded.code()};
    v1::SelectReply failed;
    failed.set_request_id(prepared_.raw.request_id);
    failed.set_code(static_cast<int32_t>(encoded.code()));
    failed.set_message(std::string(encoded.message()));
    (void)SerializeMessage(failed, buffer);
  }
  Record(select_, outcome_);  // before the client can see the answer
  if (reserved_bytes_ > 0) select_.calls->ReleaseBytes(reserved_bytes_);
  PipelineSelect* stream = stream_;
  // The leases go with the request, before the client sees the reply: a
  // client that unregisters a region after its answer finds it unused.
  delete this;
  stream->OnAnswered(std::move(buffer));
}

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StartPipelineSelect(
    const SelectContext& select, grpc::CallbackServerContext* context) {
  auto* reactor = new PipelineSelect(select, context);
  reactor->Start();
  return reactor;
}

}  // namespace topk::server
