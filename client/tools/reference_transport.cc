#include "reference_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "region_memory.h"

#if TOPK_LOADGEN_CUDA
#include "topk/client/cuda_regions.h"
#endif

namespace topk::tools {
absl::StatusOr<Transport> ParseTransport(const std::string& name) {
  if (name == "inline") return Transport::kInline;
  if (name == "shm") return Transport::kShm;
  if (name == "ipc") {
#if TOPK_LOADGEN_CUDA
    return Transport::kIpc;
#else
    return absl::UnimplementedError("--transport=ipc: this build has no CUDA");
#endif
  }
  if (name == "channel") {
#if TOPK_LOADGEN_CUDA
    return Transport::kChannel;
#else
    return absl::UnimplementedError("--transport=channel: this build has no CUDA");
#endif
  }
  if (name == "channel-shm") return Transport::kChannelShm;
  return absl::InvalidArgumentError(
      absl::StrCat("--transport: '", name, "' is not inline, shm, ipc, channel or channel-shm"));
}

absl::StatusOr<std::vector<int>> ParseDeviceList(const std::string& text, const char* flag) {
  std::vector<int> devices;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int device = -1;
    if (!absl::SimpleAtoi(part, &device) || device < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=", text, ": '", part, "' is not a device ordinal (0, 1, ...)"));
    }
    if (std::find(devices.begin(), devices.end(), device) != devices.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=", text, ": device ", device, " is named twice"));
    }
    devices.push_back(device);
  }
  return devices;
}

absl::StatusOr<RowLayout> ParseRowLayout(const std::string& name) {
  if (name == "offsets") return RowLayout::kOffsets;
  if (name == "pitch") return RowLayout::kPitch;
  return absl::InvalidArgumentError(
      absl::StrCat("--row_layout: '", name, "' is not offsets or pitch"));
}

namespace {

// The common distance between row starts (elements), when every row starts
// that far after the previous one and fits in it; for one row, its length.
absl::StatusOr<int64_t> EvenPitch(const PackedRows& rows, size_t variant) {
  int64_t longest = 1;
  for (int32_t length : rows.lengths) longest = std::max<int64_t>(longest, length);
  const size_t m = rows.offsets.size();
  const int64_t pitch = m > 1 ? rows.offsets[1] - rows.offsets[0] : longest;
  bool even = pitch >= longest && (m == 0 || rows.offsets[0] == 0);
  for (size_t r = 1; even && r < m; ++r) {
    even = rows.offsets[r] - rows.offsets[r - 1] == pitch;
  }
  if (!even) {
    return absl::InvalidArgumentError(
        absl::StrCat("--row_layout=pitch: variant ", variant,
                     "'s rows are not evenly spaced (full-length rows are: --lengths=full)"));
  }
  return pitch;
}

}  // namespace

ReferenceRegions::~ReferenceRegions() = default;

absl::StatusOr<std::unique_ptr<ReferenceRegions>> ReferenceRegions::Create(
    Transport transport, client::Client& client, const std::vector<PackedRows>& rows, int32_t k,
    const client::CallOptions& options, int callers, const std::vector<int>& devices,
    RowLayout layout) {
  if (devices.empty()) return absl::InvalidArgumentError("--ipc_device: no device named");
  auto regions = std::unique_ptr<ReferenceRegions>(new ReferenceRegions());
  regions->transport_ = transport;
  absl::StatusOr<std::unique_ptr<client::RegionSession>> session =
      client::RegionSession::Open(client);
  if (!session.ok()) return session.status();
  regions->session_ = *std::move(session);

  // Layout of every region: per variant its packed scores and int64 row
  // offsets; then one output area (M x K indices) per caller.
  std::vector<uint64_t> scores_at, offsets_at;
  uint64_t size = 0;
  int64_t max_rows = 0;
  for (const PackedRows& r : rows) {
    scores_at.push_back(size);
    size += AlignRegionBytes(static_cast<size_t>(r.bytes()));
    offsets_at.push_back(size);
    size += AlignRegionBytes(r.offsets.size() * sizeof(int64_t));
    max_rows = std::max<int64_t>(max_rows, static_cast<int64_t>(r.lengths.size()));
  }
  regions->output_bytes_ = static_cast<size_t>(max_rows) * k * sizeof(int32_t);
  for (int c = 0; c < callers; ++c) {
    regions->output_at_.push_back(size);
    size += AlignRegionBytes(regions->output_bytes_);
  }
  for (size_t g = 0; g < devices.size(); ++g) {
    Placement placement{.device = devices[g], .memory = std::make_unique<RegionMemory>()};
    RegionMemory& memory = *placement.memory;
    const std::string name = absl::StrCat("data", g);
    absl::Status registered;
    if (transport == Transport::kShm) {
      absl::StatusOr<client::SharedMemorySegment> shm = client::SharedMemorySegment::Create(
          absl::StrCat("/topk-loadgen-", getpid(), "-", g), size);
      if (!shm.ok()) return shm.status();
      memory.shm = *std::move(shm);
      registered = regions->session_->Register(name, memory.shm);
    } else {
#if TOPK_LOADGEN_CUDA
      absl::StatusOr<client::CudaIpcBuffer> gpu = client::CudaIpcBuffer::Create(size, devices[g]);
      if (!gpu.ok()) return gpu.status();
      memory.gpu.emplace(*std::move(gpu));
      registered = client::Register(*regions->session_, name, *memory.gpu);
#else
      return absl::UnimplementedError("--transport=ipc: this build has no CUDA");
#endif
    }
    if (!registered.ok()) return registered;
    for (size_t v = 0; v < rows.size(); ++v) {
      const PackedRows& r = rows[v];
      const std::string_view bytes = client::ScoreBytes(r.view());
      if (absl::Status s = memory.Write(scores_at[v], bytes.data(), bytes.size()); !s.ok()) {
        return s;
      }
      if (absl::Status s = memory.Write(offsets_at[v], r.offsets.data(), r.offsets.size() * 8);
          !s.ok()) {
        return s;
      }
    }
    regions->placements_.push_back(std::move(placement));
  }
  std::vector<int64_t> pitches(rows.size(), 0);
  if (layout == RowLayout::kPitch) {
    for (size_t v = 0; v < rows.size(); ++v) {
      absl::StatusOr<int64_t> pitch = EvenPitch(rows[v], v);
      if (!pitch.ok()) return pitch.status();
      pitches[v] = *pitch;
    }
  }
  regions->requests_.resize(callers);
  for (int c = 0; c < callers; ++c) {
    const std::string name = absl::StrCat("data", regions->group_of(c));
    for (size_t v = 0; v < rows.size(); ++v) {
      client::RegionRowsRef ref;
      ref.scores = {name, scores_at[v]};
      ref.num_rows = static_cast<int32_t>(rows[v].lengths.size());
      if (layout == RowLayout::kPitch) {
        ref.row_pitch = pitches[v];
      } else {
        ref.row_offsets = client::RegionSlice{name, offsets_at[v]};
      }
      ref.lengths = rows[v].lengths;
      ref.dtype = ToWire(rows[v].dtype);
      const client::RegionOutputRef out{.indices = {name, regions->output_at_[c]}};
      regions->requests_[c].push_back(regions->session_->MakeRequest(k, ref, &out, options));
    }
  }
  return regions;
}

std::string ReferenceRegions::group_name(int group) const {
  return absl::StrCat(transport_ == Transport::kIpc ? "gpu" : "shm", placements_[group].device);
}

absl::Status ReferenceRegions::ReadOutput(int caller, client::SelectResult& result) const {
  result.indices.resize(static_cast<size_t>(result.num_rows) * result.k);
  return placements_[group_of(caller)].memory->Read(output_at_[caller], result.indices.data(),
                                                    result.indices.size() * sizeof(int32_t));
}

}  // namespace topk::tools
