#include "server/transport/call_tracker.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace topk::server {
namespace {

constexpr absl::Duration kWatchPeriod = absl::Milliseconds(100);
// When, after request bytes fell to zero, freed memory goes back to the OS.
constexpr absl::Duration kReleaseAfter[] = {absl::Seconds(1), absl::Seconds(3)};

absl::Status ShuttingDown() {
  return absl::UnavailableError(
      "the server is shutting down (lame duck); retry, another replica will answer");
}

}  // namespace

CallTracker::CallTracker(CallLimits limits) : limits_(std::move(limits)) {
  watchdog_ = std::thread([this] { Watch(); });
}

CallTracker::~CallTracker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  watchdog_.join();
}

bool CallTracker::WithinDrainGraceLocked(int64_t message_bytes) const {
  if (!draining()) return true;
  const absl::Duration since = absl::Now() - drain_start_;
  const bool held_by_grpc = since <= limits_.drain_dispatch_grace;
  const bool upload =
      message_bytes >= limits_.drain_upload_min_bytes && since <= limits_.drain_upload_grace;
  return held_by_grpc || upload;
}

absl::Status CallTracker::BeginCall(int64_t message_bytes) {
  absl::MutexLock lock(&mu_);
  if (!WithinDrainGraceLocked(message_bytes)) return ShuttingDown();
  ++calls_;
  return absl::OkStatus();
}

absl::Status CallTracker::AdmitStreamedRequest(int64_t message_bytes) const {
  absl::MutexLock lock(&mu_);
  return WithinDrainGraceLocked(message_bytes) ? absl::OkStatus() : ShuttingDown();
}

void CallTracker::EndCall() {
  absl::MutexLock lock(&mu_);
  --calls_;
}

absl::Status CallTracker::BeginStream(TrackedStream* stream) {
  absl::MutexLock lock(&mu_);
  // A stream the client opened before the drain can reach its handler after
  // it, as a unary call can: the same dispatch grace (its first message's
  // size is not known yet, so no upload grace).
  if (!WithinDrainGraceLocked(0)) return ShuttingDown();
  if (limits_.max_streams > 0 && static_cast<int64_t>(streams_.size()) >= limits_.max_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many open streams (--max_streams = ", limits_.max_streams,
                     "); retry later or send the batch as one Select"));
  }
  streams_.insert(stream);
  return absl::OkStatus();
}

void CallTracker::EndStream(TrackedStream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

absl::Status CallTracker::ReserveBytes(int64_t bytes) {
  int64_t held = bytes_.load(std::memory_order_relaxed);
  do {
    if (limits_.max_inflight_bytes > 0 && held + bytes > limits_.max_inflight_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server holds ", held, " bytes of requests in flight and ", bytes,
                       " more do not fit in --max_inflight_bytes = ", limits_.max_inflight_bytes,
                       "; retry later"));
    }
  } while (!bytes_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (held + bytes > peak &&
         !peak_.compare_exchange_weak(peak, held + bytes, std::memory_order_relaxed)) {
  }
  return absl::OkStatus();
}

void CallTracker::ReleaseBytes(int64_t bytes) {
  bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

void CallTracker::StartDraining() {
  absl::MutexLock lock(&mu_);
  if (!draining()) drain_start_ = absl::Now();
  draining_.store(true, std::memory_order_release);
}

bool CallTracker::WaitForCalls(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  // Uploads that began before the drain are invisible until their message is
  // complete, and stopping gRPC cancels them: give them the grace period
  // even when no call is in flight yet.
  auto hurried = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return hurry_; };
  mu_.AwaitWithDeadline(absl::Condition(&hurried),
                        std::min(deadline, drain_start_ + std::max(limits_.drain_upload_grace,
                                                                   limits_.drain_dispatch_grace)));
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return hurry_ || (calls_ == 0 && streams_.empty());
  };
  mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  return calls_ == 0 && streams_.empty();
}

void CallTracker::Hurry() {
  absl::MutexLock lock(&mu_);
  hurry_ = true;
}

int64_t CallTracker::calls_in_flight() const {
  absl::MutexLock lock(&mu_);
  return calls_ + static_cast<int64_t>(streams_.size());
}

int64_t CallTracker::open_streams() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(streams_.size());
}

void CallTracker::Watch() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), kWatchPeriod)) return;
    }
    const absl::Time now = absl::Now();
    ExpireIdleStreams(now);
    ReleaseMemoryAfterBurst(now);
  }
}

void CallTracker::ExpireIdleStreams(absl::Time now) {
  const bool drain = draining();
  const absl::Duration timeout =
      drain ? std::min(limits_.drain_idle_timeout, limits_.stream_idle_timeout)
            : limits_.stream_idle_timeout;
  std::vector<TrackedStream*> idle;
  {
    absl::MutexLock lock(&mu_);
    for (TrackedStream* stream : streams_) {
      const absl::Time last = stream->last_activity();
      if (last != absl::InfinitePast() && now - last > timeout) {
        stream->Ref();  // ended below, outside the lock: ending may run OnDone inline
        idle.push_back(stream);
      }
    }
  }
  for (TrackedStream* stream : idle) {
    stream->Expire(drain ? ShuttingDown()
                         : absl::DeadlineExceededError(
                               absl::StrCat("the stream sent nothing for ",
                                            absl::FormatDuration(limits_.stream_idle_timeout),
                                            " (--stream_idle_timeout)")));
    stream->Unref();
  }
}

void CallTracker::ReleaseMemoryAfterBurst(absl::Time now) {
  if (!limits_.on_idle_after_burst) return;
  // peak_ covers every reservation since the last tick, so a burst shorter
  // than the tick is still seen.
  const int64_t peak = peak_.exchange(0, std::memory_order_relaxed);
  burst_peak_ = std::max(burst_peak_, peak);
  if (bytes_in_flight() > 0) {
    zero_since_ = absl::InfiniteFuture();
    return;
  }
  if (peak > 0 || zero_since_ == absl::InfiniteFuture()) {  // the load just stopped
    zero_since_ = now;
    if (burst_peak_ >= limits_.idle_release_min_bytes) releases_left_ = std::size(kReleaseAfter);
    burst_peak_ = 0;
  }
  // gRPC frees some of a call's buffers after the call is done (transport
  // and arena memory): a second pass a few seconds later returns those too.
  while (releases_left_ > 0 &&
         now - zero_since_ >= kReleaseAfter[std::size(kReleaseAfter) - releases_left_]) {
    --releases_left_;
    limits_.on_idle_after_burst();
  }
}

}  // namespace topk::server
