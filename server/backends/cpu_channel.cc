#include "server/backends/cpu_channel.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/backend.h"
#include "server/backends/channel_answer.h"
#include "topk/cpu_selector.h"

namespace topk::server {
namespace {

class CpuChannelExecutor final : public ChannelExecutor {
 public:
  CpuChannelExecutor(const ChannelSpec& spec, int threads)
      : spec_(spec), selector_(CpuSelectorConfig{.threads = threads}) {}

  absl::Status Init() {
    const ProblemShape shape{.k = spec_.k,
                             .max_rows = spec_.max_rows,
                             .max_width = spec_.max_width,
                             .layout = Layout::kPitched,
                             .dtype = spec_.dtype};
    absl::StatusOr<Plan> plan = selector_.MakePlan(shape, spec_.options);
    if (!plan.ok()) return plan.status();
    plan_ = *plan;
    workspace_.resize(plan_.workspace_bytes);
    indices_.resize(static_cast<size_t>(spec_.max_rows) * spec_.k);
    row_status_.resize(spec_.max_rows);
    return absl::OkStatus();
  }

  absl::Status Launch(const ChannelCall& call) override {
    const bool wide = spec_.dtype == ScoreType::kFloat32;
    const RowBatch batch{.scores = wide ? static_cast<const float*>(call.scores) : nullptr,
                         .layout = Layout::kPitched,
                         .pitch = call.row_pitch,
                         .lengths = call.lengths,
                         .num_rows = call.num_rows,
                         .width = call.width,
                         .dtype = spec_.dtype,
                         .scores16 = wide ? nullptr : static_cast<const uint16_t*>(call.scores)};
    // Lengths live in client-writable memory: copy them once, so the rows
    // selected are the rows checked.
    lengths_.assign(call.lengths, call.lengths + call.num_rows);
    RowBatch stable = batch;
    stable.lengths = lengths_.data();
    for (int64_t r = 0; r < call.num_rows; ++r) {
      if (lengths_[r] < 0 || lengths_[r] > call.width) {
        AnswerChannelCall(*spec_.control, TOPK_CHANNEL_BAD_LENGTH, static_cast<int32_t>(r),
                          lengths_[r]);
        return absl::OkStatus();
      }
    }
    const RunContext context{.workspace = workspace_.empty() ? nullptr : workspace_.data(),
                             .workspace_bytes = workspace_.size()};
    const OutputView out{.indices = indices_.data(), .row_status = row_status_.data()};
    if (absl::Status s = selector_.Run(plan_, stable, out, context); !s.ok()) return s;
    for (int64_t r = 0; r < call.num_rows; ++r) {
      if (row_status_[r] != RowStatus::kOk) {
        AnswerChannelCall(*spec_.control, ChannelStatusOf(row_status_[r]), static_cast<int32_t>(r),
                          lengths_[r]);
        return absl::OkStatus();
      }
    }
    WriteOutputs(call);
    AnswerChannelCall(*spec_.control, TOPK_CHANNEL_OK, -1, 0);
    return absl::OkStatus();
  }

  bool Idle() override { return true; }
  void Drain() override {}
  std::string Describe() const override { return plan_.Explain(); }

 private:
  void WriteOutputs(const ChannelCall& call) {
    const int32_t k = spec_.k;
    const int bytes = ScoreTypeBytes(spec_.dtype);
    const uint32_t nan = QuietNanBits(spec_.dtype);
    for (int64_t r = 0; r < call.num_rows; ++r) {
      const int32_t* from = indices_.data() + r * k;
      std::memcpy(call.indices + r * call.out_row_stride, from, sizeof(int32_t) * k);
      if (call.values == nullptr) continue;
      const auto* row = static_cast<const std::byte*>(call.scores) + r * call.row_pitch * bytes;
      auto* dest = static_cast<std::byte*>(call.values) + r * call.out_row_stride * bytes;
      for (int32_t j = 0; j < k; ++j) {
        if (from[j] < 0) {
          std::memcpy(dest + j * bytes, &nan, bytes);  // little-endian: the low bytes
        } else {
          std::memcpy(dest + j * bytes, row + static_cast<int64_t>(from[j]) * bytes, bytes);
        }
      }
    }
  }

  ChannelSpec spec_;
  CpuSelector selector_;
  Plan plan_;
  std::vector<std::byte> workspace_;
  std::vector<int32_t> indices_;
  std::vector<RowStatus> row_status_;
  std::vector<int32_t> lengths_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelExecutor>> MakeCpuChannelExecutor(const ChannelSpec& spec,
                                                                        int threads) {
  auto executor = std::make_unique<CpuChannelExecutor>(spec, threads);
  if (absl::Status s = executor->Init(); !s.ok()) return s;
  return executor;
}

}  // namespace topk::server
