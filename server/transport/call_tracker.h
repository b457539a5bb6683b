// Admission and lifetime of the Select calls a server holds: the memory
// budget for request bytes in flight, the bounds on open streams (count,
// idle time), and the lame-duck drain (refuse new calls, wait for the
// in-flight ones). One instance per service; thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace topk::server {

struct CallLimits {
  // Request bytes (unary messages, stream chunks) held at once; beyond it a
  // call gets RESOURCE_EXHAUSTED. 0: no bound.
  int64_t max_inflight_bytes = int64_t{1} << 30;
  // SelectStream calls open at once; 0: no bound.
  int max_streams = 256;
  // A stream that receives nothing for this long is ended (DEADLINE_EXCEEDED).
  absl::Duration stream_idle_timeout = absl::Seconds(30);
  // Chunks in one stream; 0: no bound.
  int64_t max_stream_chunks = 100000;
  // While draining, a stream idle this long is ended at once (UNAVAILABLE), so
  // an abandoned stream does not hold the exit for the whole drain deadline.
  absl::Duration drain_idle_timeout = absl::Seconds(1);
  // gRPC hands a unary call to the service only once its whole message has
  // arrived, so an upload that was under way when the drain began shows up
  // as a new call. One of at least drain_upload_min_bytes that arrives
  // within drain_upload_grace of the drain's start is taken for such an
  // upload and served.
  absl::Duration drain_upload_grace = absl::Seconds(2);
  int64_t drain_upload_min_bytes = int64_t{64} << 10;
  // Even a small call gRPC already held at the drain's start reaches the
  // service later: its handler runs on a gRPC thread once one is scheduled
  // (milliseconds on a loaded host, more under CPU contention), and the
  // service cannot see when gRPC received it. A call of any size whose
  // handler runs within drain_dispatch_grace of the drain's start is taken
  // for one and served; anything else arriving while draining is refused.
  absl::Duration drain_dispatch_grace = absl::Milliseconds(500);
  // Called (on the tracker's thread) 1 s and 3 s after request bytes fell
  // back to zero, when at least idle_release_min_bytes were held at once
  // before; the server returns freed heap memory to the OS there (a heap
  // walk: milliseconds, twice per idle period at most). Empty: never.
  std::function<void()> on_idle_after_burst;
  int64_t idle_release_min_bytes = int64_t{1} << 20;
};

// A stream the tracker may end for idleness. Ref()/Unref() keep it alive
// while the tracker's thread ends it outside the tracker's lock.
class TrackedStream {
 public:
  virtual ~TrackedStream() = default;
  // When the last chunk (or the call) arrived; absl::InfinitePast() once the
  // stream has all its chunks and no longer waits on the client.
  virtual absl::Time last_activity() const = 0;
  // Ends the stream with `status` unless it already finished or was submitted.
  virtual void Expire(const absl::Status& status) = 0;
  virtual void Ref() = 0;
  virtual void Unref() = 0;
};

class CallTracker {
 public:
  explicit CallTracker(CallLimits limits);
  ~CallTracker();  // stops the watchdog thread

  CallTracker(const CallTracker&) = delete;
  CallTracker& operator=(const CallTracker&) = delete;

  // A unary call with a message of `message_bytes` starts: UNAVAILABLE while
  // draining (but see drain_dispatch_grace and drain_upload_grace). Every OK
  // is matched by one EndCall().
  absl::Status BeginCall(int64_t message_bytes);
  void EndCall();

  // A request read from a stream already admitted (SelectPipeline: one
  // stream, many requests): UNAVAILABLE while draining past the grace a
  // unary call of `message_bytes` gets; holds nothing (the stream keeps the
  // drain waiting until its requests are answered).
  absl::Status AdmitStreamedRequest(int64_t message_bytes) const;

  // A stream starts: UNAVAILABLE while draining (past drain_dispatch_grace),
  // RESOURCE_EXHAUSTED at max_streams. Every OK is matched by one
  // EndStream(stream).
  absl::Status BeginStream(TrackedStream* stream);
  void EndStream(TrackedStream* stream);

  // Takes `bytes` of the in-flight budget; RESOURCE_EXHAUSTED (nothing
  // taken) when they do not fit. Release what was taken when the call ends.
  absl::Status ReserveBytes(int64_t bytes);
  void ReleaseBytes(int64_t bytes);

  // Lame duck: from now on new calls are refused; idle streams are ended.
  void StartDraining();
  bool draining() const { return draining_.load(std::memory_order_acquire); }
  // Waits until no call is in flight, `deadline` passes, or Hurry() is
  // called; true when every call finished.
  bool WaitForCalls(absl::Time deadline);
  // Ends a WaitForCalls early (a second SIGTERM).
  void Hurry();

  int64_t bytes_in_flight() const { return bytes_.load(std::memory_order_relaxed); }
  int64_t calls_in_flight() const;
  int64_t open_streams() const;
  const CallLimits& limits() const { return limits_; }

 private:
  // Not draining, or within the grace a call of `message_bytes` that
  // reached its handler now gets (drain_dispatch_grace, drain_upload_grace).
  bool WithinDrainGraceLocked(int64_t message_bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Watch();
  void ExpireIdleStreams(absl::Time now);
  void ReleaseMemoryAfterBurst(absl::Time now);

  const CallLimits limits_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> bytes_{0};
  mutable absl::Mutex mu_;
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<TrackedStream*> streams_ ABSL_GUARDED_BY(mu_);
  bool hurry_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time drain_start_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The most request bytes held at once since the watchdog's last tick.
  std::atomic<int64_t> peak_{0};
  // Watchdog-thread state for the idle memory release.
  absl::Time zero_since_ = absl::InfiniteFuture();
  size_t releases_left_ = 0;
  int64_t burst_peak_ = 0;  // the most held since the load last stopped
  std::thread watchdog_;
};

}  // namespace topk::server
