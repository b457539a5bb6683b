#include "channel_transport.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "region_memory.h"

#if TOPK_LOADGEN_CUDA
#include "topk/client/cuda_channel.h"
#include "topk/cuda/resources.h"
#endif

namespace topk::tools {
struct ChannelCallers::Caller {
  std::unique_ptr<client::Channel> channel;
  std::vector<topk_channel_descriptor> calls;  // per variant
  uint64_t output_at = 0;
#if TOPK_LOADGEN_CUDA
  cuda::Stream stream;
#endif
};

ChannelCallers::~ChannelCallers() {
#if TOPK_LOADGEN_CUDA
  for (const auto& caller : callers_) {
    if (memory_ != nullptr && memory_->gpu.has_value() && caller->channel != nullptr) {
      (void)client::UnregisterChannelForStreams(*caller->channel);
    }
  }
#endif
}

absl::StatusOr<std::unique_ptr<ChannelCallers>> ChannelCallers::Create(
    bool on_gpu, client::Client& client, const std::vector<PackedRows>& rows, int32_t k,
    const client::CallOptions& options, int callers, int device) {
  auto made = std::unique_ptr<ChannelCallers>(new ChannelCallers());
  made->k_ = k;
  absl::StatusOr<std::unique_ptr<client::RegionSession>> session =
      client::RegionSession::Open(client);
  if (!session.ok()) return session.status();
  made->session_ = *std::move(session);
  // Per variant its rows at one pitch (its widest row) and its lengths;
  // then an output area of max M x K indices per caller.
  const ScoreType dtype = rows.front().dtype;
  const int element = ScoreTypeBytes(dtype);
  std::vector<uint64_t> scores_at, lengths_at;
  std::vector<int64_t> pitches;
  int64_t max_rows = 0;
  int64_t max_width = 1;
  uint64_t size = 0;
  for (const PackedRows& r : rows) {
    const int64_t m = static_cast<int64_t>(r.lengths.size());
    const int64_t pitch = std::max<int64_t>(1, r.width);
    scores_at.push_back(size);
    size += AlignRegionBytes(static_cast<uint64_t>(m * pitch) * element);
    lengths_at.push_back(size);
    size += AlignRegionBytes(m * sizeof(int32_t));
    pitches.push_back(pitch);
    made->rows_per_variant_.push_back(m);
    max_rows = std::max(max_rows, m);
    max_width = std::max(max_width, pitch);
  }
  const uint64_t output_bytes = static_cast<uint64_t>(max_rows) * k * sizeof(int32_t);
  std::vector<uint64_t> output_at;
  for (int c = 0; c < callers; ++c) {
    output_at.push_back(size);
    size += AlignRegionBytes(output_bytes);
  }
  made->memory_ = std::make_unique<RegionMemory>();
  RegionMemory& memory = *made->memory_;
  absl::Status registered;
  if (on_gpu) {
#if TOPK_LOADGEN_CUDA
    absl::StatusOr<client::CudaIpcBuffer> gpu = client::CudaIpcBuffer::Create(size, device);
    if (!gpu.ok()) return gpu.status();
    memory.gpu.emplace(*std::move(gpu));
    registered = client::Register(*made->session_, "channel-data", *memory.gpu);
#else
    (void)device;
    return absl::UnimplementedError("--transport=channel: this build has no CUDA");
#endif
  } else {
    absl::StatusOr<client::SharedMemorySegment> shm =
        client::SharedMemorySegment::Create(absl::StrCat("/topk-loadgen-ch-", getpid()), size);
    if (!shm.ok()) return shm.status();
    memory.shm = *std::move(shm);
    registered = made->session_->Register("channel-data", memory.shm);
  }
  if (!registered.ok()) return registered;
  for (size_t v = 0; v < rows.size(); ++v) {
    const PackedRows& r = rows[v];
    const std::string_view bytes = client::ScoreBytes(r.view());
    for (size_t row = 0; row < r.lengths.size(); ++row) {
      const uint64_t to = scores_at[v] + row * pitches[v] * element;
      if (absl::Status s = memory.Write(to, bytes.data() + r.offsets[row] * element,
                                        static_cast<size_t>(r.lengths[row]) * element);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s =
            memory.Write(lengths_at[v], r.lengths.data(), r.lengths.size() * sizeof(int32_t));
        !s.ok()) {
      return s;
    }
  }
  for (int c = 0; c < callers; ++c) {
    auto caller = std::make_unique<Caller>();
    caller->output_at = output_at[c];
    absl::StatusOr<std::unique_ptr<client::Channel>> channel =
        client::Channel::Open(*made->session_, {.k = k,
                                                .sorted = options.sorted,
                                                .deterministic = options.deterministic,
                                                .dtype = ToWire(dtype),
                                                .max_rows = static_cast<int32_t>(max_rows),
                                                .max_width = static_cast<int32_t>(max_width),
                                                .regions = {"channel-data"}});
    if (!channel.ok()) return channel.status();
    caller->channel = *std::move(channel);
#if TOPK_LOADGEN_CUDA
    if (on_gpu) {
      if (absl::Status s = client::RegisterChannelForStreams(*caller->channel); !s.ok()) return s;
      absl::StatusOr<cuda::Stream> stream = cuda::CreateStream();
      if (!stream.ok()) return stream.status();
      caller->stream = *std::move(stream);
    }
#endif
    for (size_t v = 0; v < rows.size(); ++v) {
      caller->calls.push_back(
          topk_channel_descriptor{.num_rows = static_cast<uint32_t>(rows[v].lengths.size()),
                                  .values_region = TOPK_CHANNEL_NO_REGION,
                                  .scores_offset = scores_at[v],
                                  .row_pitch = static_cast<uint64_t>(pitches[v]),
                                  .lengths_offset = lengths_at[v],
                                  .indices_offset = output_at[c]});
    }
    made->callers_.push_back(std::move(caller));
  }
  return made;
}

absl::StatusOr<client::SelectResult> ChannelCallers::Call(int caller, size_t variant) const {
  const Caller& c = *callers_[caller];
  const topk_channel_descriptor& call = c.calls[variant];
  absl::Status status;
#if TOPK_LOADGEN_CUDA
  if (memory_->gpu.has_value()) {
    status = client::EnqueueChannelCall(*c.channel, c.stream.get(), call);
    if (status.ok() && cudaStreamSynchronize(c.stream.get()) != cudaSuccess) {
      status = absl::InternalError("cudaStreamSynchronize after a channel call failed");
    }
    if (status.ok()) status = c.channel->LastStatus();
  } else {
    status = c.channel->CallOnHost(call);
  }
#else
  status = c.channel->CallOnHost(call);
#endif
  if (!status.ok()) return status;
  return client::SelectResult{.num_rows = rows_per_variant_[variant], .k = k_};
}

absl::Status ChannelCallers::ReadOutput(int caller, client::SelectResult& result) const {
  result.indices.resize(static_cast<size_t>(result.num_rows) * result.k);
  return memory_->Read(callers_[caller]->output_at, result.indices.data(),
                       result.indices.size() * sizeof(int32_t));
}

}  // namespace topk::tools
