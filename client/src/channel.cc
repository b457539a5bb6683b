#include "topk/client/channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc_status.h"
#include "grpcpp/grpcpp.h"

namespace topk::client {

absl::Status ChannelStatusToError(uint32_t status, int32_t row, int64_t value) {
  if (status == TOPK_CHANNEL_OK) return absl::OkStatus();
  const std::string where = row >= 0 ? absl::StrCat(" (row ", row, ", value ", value, ")")
                                     : absl::StrCat(" (value ", value, ")");
  const std::string message =
      absl::StrCat("channel call refused: ", topk_channel_status_field(status), where);
  switch (status) {
    case TOPK_CHANNEL_CLOSED:
      return absl::UnavailableError(message);
    case TOPK_CHANNEL_DEVICE_ERROR:
      return absl::InternalError(message);
    default:
      return absl::InvalidArgumentError(message);
  }
}

absl::StatusOr<std::unique_ptr<Channel>> Channel::Open(RegionSession& session,
                                                       const ChannelOptions& options) {
  auto channel = std::unique_ptr<Channel>(new Channel());
  channel->stub_ = v1::TopK::NewStub(session.grpc_channel());
  channel->session_ = session.id();
  channel->options_ = options;
  v1::OpenChannelRequest request;
  request.set_session_id(session.id());
  request.set_k(options.k);
  request.mutable_options()->set_sorted(options.sorted);
  request.mutable_options()->set_deterministic(options.deterministic);
  request.mutable_options()->set_return_values(options.return_values);
  request.set_dtype(options.dtype);
  request.set_max_rows(options.max_rows);
  request.set_max_width(options.max_width);
  for (const std::string& region : options.regions) request.add_regions(region);
  v1::OpenChannelResponse response;
  grpc::ClientContext context;
  if (absl::Status s = ToAbsl(channel->stub_->OpenChannel(&context, request, &response)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("OpenChannel: ", s.message()));
  }
  if (response.layout_version() != TOPK_CHANNEL_LAYOUT_VERSION ||
      response.control_bytes() < sizeof(topk_channel_control)) {
    return absl::FailedPreconditionError(
        absl::StrCat("OpenChannel: the server's control block layout ", response.layout_version(),
                     " is not this client's ", TOPK_CHANNEL_LAYOUT_VERSION));
  }
  channel->id_ = response.channel_id();
  channel->plan_ = response.plan();
  const int fd = shm_open(response.control_shm_name().c_str(), O_RDWR, 0);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "channel control block ", response.control_shm_name(), ": ", std::strerror(errno)));
  }
  void* mapped =
      mmap(nullptr, TOPK_CHANNEL_CONTROL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("channel control block: mmap: ", std::strerror(errno)));
  }
  channel->control_ = static_cast<topk_channel_control*>(mapped);
  return channel;
}

Channel::~Channel() {
  if (stub_ != nullptr && !id_.empty()) {
    v1::CloseChannelRequest request;
    request.set_session_id(session_);
    request.set_channel_id(id_);
    v1::CloseChannelResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    (void)stub_->CloseChannel(&context, request, &response);
  }
  if (control_ != nullptr) munmap(control_, TOPK_CHANNEL_CONTROL_BYTES);
}

absl::Status Channel::CallOnHost(const topk_channel_descriptor& call, absl::Duration timeout) {
  std::memcpy(const_cast<topk_channel_descriptor*>(&control_->desc), &call, sizeof(call));
  std::atomic_thread_fence(std::memory_order_release);
  control_->ready = 1;
  const absl::Time deadline = absl::Now() + timeout;
  for (int spins = 0; control_->done == 0; ++spins) {
    if (spins > 4096) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("channel ", id_, ": no answer within ", absl::FormatDuration(timeout)));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  control_->done = 0;
  return LastStatus();
}

absl::Status Channel::LastStatus() const {
  return ChannelStatusToError(control_->status, control_->status_row, control_->status_value);
}

}  // namespace topk::client
