// The channels clients opened, by session, and the poller that serves them
// (docs/channels.md). A channel is a control block the server owns, an
// executor on one device, and leases on the regions its calls may name.
// One poller thread watches every channel's `ready` word: it takes a call,
// checks its descriptor on the host (channel_descriptor.h), hands it to the
// executor (which answers it from the device), and counts it when the
// executor is idle again. Nothing the server enqueues ever waits for a
// client, so a channel that stops calling holds nothing but its memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/channel_descriptor.h"
#include "server/engine/engine.h"
#include "server/regions/region.h"

namespace topk::server {

struct ChannelLimits {
  int64_t max_channels = 64;             // per server (--max_channels)
  int64_t max_channels_per_session = 8;  // (--max_channels_per_session)
  // The poller spins this long after the last call it saw before it starts
  // sleeping between looks (--channel_spin_us): a decode loop's calls then
  // find it awake, at the price of one busy core while a channel is in use.
  int64_t spin_us = 2000;
  // Its sleep between looks once idle (--channel_poll_us): the latency a
  // call that arrives after a pause pays at most.
  int64_t idle_poll_us = 50;
};

// What OpenChannel asks for, with the session's regions already leased.
struct ChannelRequest {
  std::string session;
  ChannelSpec spec;  // control is filled by the registry
  int32_t device_ordinal = -1;
  std::vector<RegionLease> leases;
  std::vector<ChannelRegionView> views;  // views[i] of leases[i]
};

struct OpenedChannel {
  std::string id;
  std::string control_name;
  std::string plan;
};

struct ChannelTotals {
  uint64_t calls = 0;
  uint64_t errors = 0;
};

class ChannelRegistry {
 public:
  ChannelRegistry(const Engine* engine, ChannelLimits limits);
  ~ChannelRegistry();  // Stop()
  ChannelRegistry(const ChannelRegistry&) = delete;
  ChannelRegistry& operator=(const ChannelRegistry&) = delete;

  // RESOURCE_EXHAUSTED past the limits; the executor's error otherwise.
  absl::StatusOr<OpenedChannel> Open(ChannelRequest request);
  // NOT_FOUND for a channel the session does not hold.
  absl::StatusOr<ChannelTotals> Close(const std::string& session, const std::string& id);
  // Closes every channel of the session (its end, or the client's death).
  void CloseSession(const std::string& session);
  // Closes every channel and stops the poller (shutdown).
  void Stop();

  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  int64_t open_channels() const;

 private:
  struct Channel;
  void Poll();
  // One look at one channel; true when it did something.
  bool Serve(Channel& channel);
  void Retire(Channel& channel);
  static ChannelTotals Shut(Channel& channel);

  const Engine* engine_;
  ChannelLimits limits_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> errors_{0};
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<Channel>> channels_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_id_ ABSL_GUARDED_BY(mutex_) = 0;
  // The poller's list, rebuilt when `version_` moves.
  std::vector<std::shared_ptr<Channel>> list_ ABSL_GUARDED_BY(mutex_);
  std::atomic<uint64_t> version_{0};
  std::atomic<bool> stop_{false};
  std::thread poller_;
};

}  // namespace topk::server
