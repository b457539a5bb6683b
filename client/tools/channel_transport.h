// topk-loadgen's channel transports (docs/channels.md): the workload's rows
// pitched in one region with their lengths beside them, an output area and
// a channel per caller, and one descriptor per caller and variant. A call
// makes no RPC: --transport=channel enqueues it on the caller's CUDA stream
// (rows in GPU memory exported over IPC; the stream is then synchronised, as
// a closed loop needs the answer before the next call), --transport=
// channel-shm writes it from the host (rows in shared memory: a CPU server).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "packed_rows.h"
#include "topk/client/channel.h"
#include "topk/client/client.h"
#include "topk/client/regions.h"

namespace topk::tools {

struct RegionMemory;  // region_memory.h

class ChannelCallers {
 public:
  // `on_gpu`: the rows in a CUDA allocation on `device` (a CUDA build), else
  // shared memory. One channel per caller, K and the caps those of `rows`.
  static absl::StatusOr<std::unique_ptr<ChannelCallers>> Create(bool on_gpu, client::Client& client,
                                                                const std::vector<PackedRows>& rows,
                                                                int32_t k,
                                                                const client::CallOptions& options,
                                                                int callers, int device);
  ~ChannelCallers();

  // One call of variant `variant` by caller `caller` (its own thread): the
  // answer is in the caller's output area when this returns; the result
  // holds its shape, and the call's status as the error.
  absl::StatusOr<client::SelectResult> Call(int caller, size_t variant) const;
  // Caller `caller`'s last answer, read from its output area.
  absl::Status ReadOutput(int caller, client::SelectResult& result) const;

 private:
  struct Caller;
  ChannelCallers() = default;
  int32_t k_ = 0;
  std::vector<int64_t> rows_per_variant_;
  std::unique_ptr<client::RegionSession> session_;
  std::unique_ptr<RegionMemory> memory_;
  std::vector<std::unique_ptr<Caller>> callers_;
};

}  // namespace topk::tools
