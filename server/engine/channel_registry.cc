#include "server/engine/channel_registry.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/backends/channel_answer.h"
#include "server/engine/channel_block.h"
#include "spdlog/spdlog.h"

namespace topk::server {

struct ChannelRegistry::Channel {
  std::string id;
  std::string session;
  ChannelSpec spec;
  std::unique_ptr<ChannelBlock> block;
  std::vector<RegionLease> leases;
  std::vector<ChannelRegionView> views;
  // Held by the poller for each look and by Close: a channel is never
  // served and shut at once.
  absl::Mutex mutex;
  bool closed ABSL_GUARDED_BY(mutex) = false;
  bool in_flight ABSL_GUARDED_BY(mutex) = false;
  uint64_t calls ABSL_GUARDED_BY(mutex) = 0;
  uint64_t errors ABSL_GUARDED_BY(mutex) = 0;
  // Declared last: destroyed first, while the block it answers in is mapped.
  std::unique_ptr<ChannelExecutor> executor;
};

ChannelRegistry::ChannelRegistry(const Engine* engine, ChannelLimits limits)
    : engine_(engine), limits_(limits), poller_([this] { Poll(); }) {}

ChannelRegistry::~ChannelRegistry() { Stop(); }

absl::StatusOr<OpenedChannel> ChannelRegistry::Open(ChannelRequest request) {
  {
    absl::MutexLock lock(&mutex_);
    if (static_cast<int64_t>(channels_.size()) >= limits_.max_channels) {
      return absl::ResourceExhaustedError(
          absl::StrCat("channels: the server holds ", channels_.size(),
                       " (--max_channels=", limits_.max_channels, ")"));
    }
    int64_t mine = 0;
    for (const auto& [id, channel] : channels_) mine += channel->session == request.session;
    if (mine >= limits_.max_channels_per_session) {
      return absl::ResourceExhaustedError(
          absl::StrCat("channels: session ", request.session, " holds ", mine,
                       " (--max_channels_per_session=", limits_.max_channels_per_session, ")"));
    }
  }
  auto channel = std::make_shared<Channel>();
  absl::StatusOr<std::unique_ptr<ChannelBlock>> block = ChannelBlock::Create();
  if (!block.ok()) return block.status();
  channel->block = *std::move(block);
  channel->session = request.session;
  channel->spec = request.spec;
  channel->spec.control = channel->block->control();
  channel->leases = std::move(request.leases);
  channel->views = std::move(request.views);
  absl::StatusOr<std::unique_ptr<ChannelExecutor>> executor =
      engine_->OpenChannel(request.device_ordinal, channel->spec);
  if (!executor.ok()) return executor.status();
  channel->executor = *std::move(executor);
  OpenedChannel opened{.control_name = channel->block->name(),
                       .plan = channel->executor->Describe()};
  absl::MutexLock lock(&mutex_);
  channel->id = opened.id = absl::StrCat("ch", next_id_++);
  channels_.emplace(channel->id, channel);
  list_.push_back(std::move(channel));
  version_.fetch_add(1, std::memory_order_release);
  return opened;
}

ChannelTotals ChannelRegistry::Shut(Channel& channel) {
  absl::MutexLock lock(&channel.mutex);
  if (channel.closed) return {channel.calls, channel.errors};
  channel.closed = true;
  channel.executor->Drain();
  // A call posted but never taken: answer it, so a live client's stream
  // goes on instead of waiting for a server that will never look again.
  topk_channel_control& control = *channel.spec.control;
  if (!channel.in_flight && control.ready != 0) {
    control.ready = 0;
    AnswerChannelCall(control, TOPK_CHANNEL_CLOSED, -1, 0);
  }
  channel.executor.reset();
  return {channel.calls, channel.errors};
}

absl::StatusOr<ChannelTotals> ChannelRegistry::Close(const std::string& session,
                                                     const std::string& id) {
  std::shared_ptr<Channel> channel;
  {
    absl::MutexLock lock(&mutex_);
    auto it = channels_.find(id);
    if (it == channels_.end() || it->second->session != session) {
      return absl::NotFoundError(
          absl::StrCat("channel_id: no channel '", id, "' in session ", session));
    }
    channel = it->second;
    channels_.erase(it);
    std::erase(list_, channel);
    version_.fetch_add(1, std::memory_order_release);
  }
  return Shut(*channel);
}

void ChannelRegistry::CloseSession(const std::string& session) {
  std::vector<std::shared_ptr<Channel>> closing;
  {
    absl::MutexLock lock(&mutex_);
    for (auto it = channels_.begin(); it != channels_.end();) {
      if (it->second->session == session) {
        closing.push_back(it->second);
        std::erase(list_, it->second);
        channels_.erase(it++);
      } else {
        ++it;
      }
    }
    if (!closing.empty()) version_.fetch_add(1, std::memory_order_release);
  }
  for (const auto& channel : closing) Shut(*channel);
}

void ChannelRegistry::Stop() {
  std::vector<std::shared_ptr<Channel>> closing;
  {
    absl::MutexLock lock(&mutex_);
    for (auto& [id, channel] : channels_) closing.push_back(channel);
    channels_.clear();
    list_.clear();
    version_.fetch_add(1, std::memory_order_release);
  }
  for (const auto& channel : closing) Shut(*channel);
  stop_.store(true, std::memory_order_release);
  if (poller_.joinable()) poller_.join();
}

int64_t ChannelRegistry::open_channels() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int64_t>(channels_.size());
}

void ChannelRegistry::Retire(Channel& channel) {
  const topk_channel_control& control = *channel.spec.control;
  const bool refused = control.status != TOPK_CHANNEL_OK;
  ++channel.calls;
  channel.errors += refused;
  channel.spec.control->calls = channel.calls;
  channel.spec.control->errors = channel.errors;
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (refused) errors_.fetch_add(1, std::memory_order_relaxed);
}

bool ChannelRegistry::Serve(Channel& channel) {
  absl::MutexLock lock(&channel.mutex);
  if (channel.closed) return false;
  if (channel.in_flight) {
    if (!channel.executor->Idle()) return true;
    channel.in_flight = false;
    Retire(channel);
    return true;
  }
  topk_channel_control& control = *channel.spec.control;
  if (control.ready == 0) return false;
  control.ready = 0;
  // The client wrote the descriptor before ready: read it after.
  std::atomic_thread_fence(std::memory_order_acquire);
  topk_channel_descriptor desc;
  std::memcpy(&desc, const_cast<const topk_channel_descriptor*>(&control.desc), sizeof(desc));
  const CheckedCall checked = CheckChannelCall(desc, channel.spec, channel.views);
  if (checked.status != TOPK_CHANNEL_OK || checked.call.num_rows == 0) {
    AnswerChannelCall(control, checked.status, checked.row, checked.value);
    Retire(channel);
    return true;
  }
  if (absl::Status launched = channel.executor->Launch(checked.call); !launched.ok()) {
    spdlog::error("channel {} of session {}: {}", channel.id, channel.session, launched.ToString());
    AnswerChannelCall(control, TOPK_CHANNEL_DEVICE_ERROR, -1, 0);
    Retire(channel);
    return true;
  }
  channel.in_flight = true;
  return true;
}

void ChannelRegistry::Poll() {
  std::vector<std::shared_ptr<Channel>> list;
  uint64_t seen = ~uint64_t{0};
  auto last_active = std::chrono::steady_clock::now();
  const auto spin = std::chrono::microseconds(limits_.spin_us);
  const auto nap = std::chrono::microseconds(limits_.idle_poll_us);
  while (!stop_.load(std::memory_order_acquire)) {
    if (const uint64_t version = version_.load(std::memory_order_acquire); version != seen) {
      absl::MutexLock lock(&mutex_);
      list = list_;
      seen = version;
    }
    bool active = false;
    for (const auto& channel : list) active |= Serve(*channel);
    const auto now = std::chrono::steady_clock::now();
    if (active) {
      last_active = now;
    } else if (list.empty() || now - last_active > spin) {
      std::this_thread::sleep_for(list.empty() ? std::chrono::milliseconds(1) : nap);
    }
  }
}

}  // namespace topk::server
