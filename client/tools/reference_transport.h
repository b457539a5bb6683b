// topk-loadgen's by-reference transports (--transport=shm|ipc): the
// workload's rows placed once in a region (a shared-memory segment, or a
// CUDA allocation exported over IPC), an output area per caller, and one
// prebuilt request per caller and variant that names them. The answer is
// written in place; a caller reads it back only for the calls it verifies.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "packed_rows.h"
#include "topk/client/client.h"
#include "topk/client/regions.h"

namespace topk::tools {

struct RegionMemory;  // region_memory.h

// kChannel / kChannelShm: channel_transport.h.
enum class Transport { kInline, kShm, kIpc, kChannel, kChannelShm };

// "inline", "shm", "ipc", "channel" or "channel-shm"; ipc and channel need a
// build with CUDA.
absl::StatusOr<Transport> ParseTransport(const std::string& name);

// How a request names its row starts: by an int64 offset per row stored in
// the region (RegionRows.row_offsets: the server reads them out of the
// region per request, from device memory for ipc), or by one row pitch in
// the request itself (rows evenly spaced, e.g. full-length packed rows).
enum class RowLayout { kOffsets, kPitch };

// "offsets" or "pitch".
absl::StatusOr<RowLayout> ParseRowLayout(const std::string& name);

// "0" or "0,1": distinct non-negative device ordinals, at least one.
absl::StatusOr<std::vector<int>> ParseDeviceList(const std::string& text, const char* flag);

class ReferenceRegions {
 public:
  // Places `rows` (all variants) and `callers` output areas in a region of
  // `transport`'s kind per entry of `devices` (ipc: on that CUDA device;
  // shm: a segment each, the entry only naming its group), registered in a
  // session opened on `client`, and builds the requests: caller c names the
  // region of entry c % devices.size(), so one process can load every GPU
  // of a host. kPitch needs every variant's rows evenly spaced.
  static absl::StatusOr<std::unique_ptr<ReferenceRegions>> Create(
      Transport transport, client::Client& client, const std::vector<PackedRows>& rows, int32_t k,
      const client::CallOptions& options, int callers, const std::vector<int>& devices,
      RowLayout layout = RowLayout::kOffsets);
  ~ReferenceRegions();

  // Which entry of `devices` caller `caller` uses, and a name for it
  // ("gpu1", "shm0") in per-group reports.
  int group_of(int caller) const { return caller % static_cast<int>(placements_.size()); }
  int groups() const { return static_cast<int>(placements_.size()); }
  std::string group_name(int group) const;

  const v1::SelectRequest& request(int caller, size_t variant) const {
    return requests_[caller][variant];
  }
  // Caller `caller`'s last answer, read from its output area.
  absl::Status ReadOutput(int caller, client::SelectResult& result) const;

 private:
  // One region: its memory and the device (or segment label) it is on.
  struct Placement {
    int device = 0;
    std::unique_ptr<RegionMemory> memory;
  };
  ReferenceRegions() = default;
  std::unique_ptr<client::RegionSession> session_;
  Transport transport_ = Transport::kShm;
  std::vector<Placement> placements_;
  std::vector<std::vector<v1::SelectRequest>> requests_;
  std::vector<uint64_t> output_at_;  // per caller, bytes into the region
  size_t output_bytes_ = 0;          // per caller
};

}  // namespace topk::tools
