#include "server/backends/cuda_channel.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/backends/cuda_channel_epilogue.h"
#include "server/backends/cuda_worker.h"
#include "topk/cuda/resources.h"
#include "topk/cuda/status.h"
#include "topk/cuda_selector.h"

namespace topk::server {
namespace {

// The control block registered as mapped host memory for as long as the
// executor lives, so that its kernels can write status and done.
class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration() {
    if (host_ != nullptr) cudaHostUnregister(host_);
  }

  absl::Status Register(void* host, size_t bytes) {
    TOPK_CUDA_RETURN_IF_ERROR(
        cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
    host_ = host;
    TOPK_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&device_, host, 0));
    return absl::OkStatus();
  }
  void* device() const { return device_; }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
};

class CudaChannelExecutor final : public ChannelExecutor {
 public:
  CudaChannelExecutor(const ChannelSpec& spec, int ordinal) : spec_(spec), ordinal_(ordinal) {}

  ~CudaChannelExecutor() override { Drain(); }

  absl::Status Init() {
    TOPK_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
    absl::StatusOr<std::unique_ptr<CudaSelector>> selector =
        CudaSelector::Create(CudaSelectorConfig{.device = ordinal_});
    if (!selector.ok()) return selector.status();
    selector_ = *std::move(selector);
    const ProblemShape shape{.k = spec_.k,
                             .max_rows = spec_.max_rows,
                             .max_width = spec_.max_width,
                             .layout = Layout::kPitched,
                             .dtype = spec_.dtype};
    absl::StatusOr<Plan> plan = selector_->MakePlan(shape, spec_.options);
    if (!plan.ok()) return plan.status();
    plan_ = *plan;
    if (absl::Status s = Allocate(); !s.ok()) return s;
    if (absl::Status s = control_.Register(spec_.control, TOPK_CHANNEL_CONTROL_BYTES); !s.ok()) {
      return s;
    }
    const RunContext context{.workspace = workspace_.get(),
                             .workspace_bytes = workspace_.bytes(),
                             .stream = stream_.get()};
    absl::StatusOr<std::unique_ptr<CudaGraphRunner>> graph =
        CudaGraphRunner::Create(*selector_, plan_, context);
    if (!graph.ok()) return graph.status();
    graph_ = *std::move(graph);
    TOPK_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
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
    const OutputView out{.indices = staged_.get(), .row_status = row_status_.get()};
    if (absl::Status s = graph_->Replay(batch, out, stream_.get()); !s.ok()) return s;
    const ChannelEpilogueArgs epilogue{
        .staged = staged_.get(),
        .row_status = row_status_.get(),
        .lengths = call.lengths,
        .scores = call.scores,
        .row_pitch = call.row_pitch,
        .dtype = spec_.dtype,
        .num_rows = call.num_rows,
        .k = spec_.k,
        .indices = call.indices,
        .values = call.values,
        .stride = call.out_row_stride,
        .control = static_cast<topk_channel_control*>(control_.device()),
        .finished = finished_.get()};
    if (absl::Status s = LaunchChannelEpilogue(epilogue, stream_.get()); !s.ok()) {
      return DeviceLost(s);
    }
    TOPK_CUDA_RETURN_IF_ERROR(cudaEventRecord(answered_.get(), stream_.get()));
    return absl::OkStatus();
  }

  bool Idle() override { return cudaEventQuery(answered_.get()) != cudaErrorNotReady; }

  void Drain() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_.get());
  }

  std::string Describe() const override { return plan_.Explain(); }

 private:
  absl::Status Allocate() {
    auto stream = cuda::CreateStream();
    if (!stream.ok()) return stream.status();
    stream_ = *std::move(stream);
    auto answered = cuda::CreateEvent(cudaEventDisableTiming);
    if (!answered.ok()) return answered.status();
    answered_ = *std::move(answered);
    // Recorded once so that Idle() holds before the first call.
    TOPK_CUDA_RETURN_IF_ERROR(cudaEventRecord(answered_.get(), stream_.get()));
    auto workspace = cuda::AllocateDevice<std::byte>(plan_.workspace_bytes);
    if (!workspace.ok()) return workspace.status();
    workspace_ = *std::move(workspace);
    auto staged = cuda::AllocateDevice<int32_t>(static_cast<size_t>(spec_.max_rows) * spec_.k);
    if (!staged.ok()) return staged.status();
    staged_ = *std::move(staged);
    auto status = cuda::AllocateDevice<RowStatus>(spec_.max_rows);
    if (!status.ok()) return status.status();
    row_status_ = *std::move(status);
    auto finished = cuda::AllocateDevice<unsigned>(1);
    if (!finished.ok()) return finished.status();
    finished_ = *std::move(finished);
    TOPK_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(finished_.get(), 0, sizeof(unsigned), stream_.get()));
    return absl::OkStatus();
  }

  ChannelSpec spec_;
  int ordinal_;
  std::unique_ptr<CudaSelector> selector_;
  Plan plan_;
  // Buffers before the graph that reads them; the stream before both (its
  // Drain in the destructor runs first, then members go in reverse order).
  cuda::Stream stream_;
  cuda::Event answered_;
  HostRegistration control_;
  cuda::DeviceBuffer<std::byte> workspace_;
  cuda::DeviceBuffer<int32_t> staged_;
  cuda::DeviceBuffer<RowStatus> row_status_;
  cuda::DeviceBuffer<unsigned> finished_;
  std::unique_ptr<CudaGraphRunner> graph_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelExecutor>> MakeCudaChannelExecutor(const ChannelSpec& spec,
                                                                         int ordinal) {
  auto executor = std::make_unique<CudaChannelExecutor>(spec, ordinal);
  if (absl::Status s = executor->Init(); !s.ok()) return s;
  return executor;
}

bool CudaDeviceUnderMps(int ordinal) {
  int value = 0;
  return cudaDeviceGetAttribute(&value, cudaDevAttrMpsEnabled, ordinal) == cudaSuccess &&
         value != 0;
}

}  // namespace topk::server
