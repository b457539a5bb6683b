// CUDA IPC regions end to end: this process exports device memory and
// events, a topk-server process (CUDA backend) opens them and selects by
// reference, and every answer is checked by the exactness verifier. Skips
// without a CUDA device.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "packed_rows.h"
#include "support/server_process.h"
#include "support/test_server.h"
#include "topk/client/channel.h"
#include "topk/client/cuda_channel.h"
#include "topk/client/cuda_regions.h"
#include "topk/client/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

// The rows of every case (support/test_server.h's Rows, K = 64).
constexpr uint64_t kSeed = 11;

bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

class CudaRegions : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    // SIGTERM at the end, so the server releases its device and IPC handles.
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"--enable_regions", "--max_k=2048"},
        ServerProcessOptions{.backend = "cuda", .log_level = "", .stop_signal = SIGTERM});
    auto client = client::Client::Connect({.target = server_->target()});
    ASSERT_TRUE(client.ok());
    client_ = *std::move(client);
    ASSERT_TRUE(client_->WaitForServing(absl::Seconds(60)).ok());
    auto session = client::RegionSession::Open(*client_);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::RegionSession> session_;
};

// Rows pitched on the GPU with NaN padding, lengths and packed offsets
// beside them, and room for an M x stride output of indices and values.
struct DeviceRows {
  client::CudaIpcBuffer buffer;
  int64_t pitch = 0;
  uint64_t lengths_at = 0, offsets_at = 0, indices_at = 0, values_at = 0;
  int64_t stride = 0;
};

uint64_t Align(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

absl::StatusOr<DeviceRows> Upload(const tools::PackedRows& rows, int64_t stride) {
  const int64_t m = static_cast<int64_t>(rows.lengths.size());
  const int64_t pitch = rows.width + 1;
  std::vector<float> pitched(m * pitch, std::nanf(""));
  std::vector<int64_t> offsets(m);
  for (int64_t r = 0; r < m; ++r) {
    offsets[r] = r * pitch;
    std::memcpy(pitched.data() + r * pitch, rows.scores.data() + rows.offsets[r],
                rows.lengths[r] * sizeof(float));
  }
  const uint64_t lengths_at = Align(pitched.size() * sizeof(float));
  const uint64_t offsets_at = lengths_at + Align(m * sizeof(int32_t));
  const uint64_t indices_at = offsets_at + Align(m * sizeof(int64_t));
  const uint64_t values_at = indices_at + Align(m * stride * sizeof(int32_t));
  absl::StatusOr<client::CudaIpcBuffer> buffer =
      client::CudaIpcBuffer::Create(values_at + Align(m * stride * sizeof(float)), 0);
  if (!buffer.ok()) return buffer.status();
  std::byte* base = buffer->data();
  cudaMemcpy(base, pitched.data(), pitched.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(base + lengths_at, rows.lengths.data(), m * sizeof(int32_t), cudaMemcpyHostToDevice);
  cudaMemcpy(base + offsets_at, offsets.data(), m * sizeof(int64_t), cudaMemcpyHostToDevice);
  cudaMemset(base + indices_at, 0x7e, m * stride * sizeof(int32_t));
  if (cudaDeviceSynchronize() != cudaSuccess) return absl::InternalError("upload failed");
  return DeviceRows{.buffer = *std::move(buffer),
                    .pitch = pitch,
                    .lengths_at = lengths_at,
                    .offsets_at = offsets_at,
                    .indices_at = indices_at,
                    .values_at = values_at,
                    .stride = stride};
}

client::SelectResult Download(const DeviceRows& d, int64_t m, int32_t k, bool values) {
  client::SelectResult result{.num_rows = m, .k = k};
  std::vector<int32_t> indices(m * d.stride);
  cudaMemcpy(indices.data(), d.buffer.data() + d.indices_at, indices.size() * 4,
             cudaMemcpyDeviceToHost);
  std::vector<float> vals(m * d.stride);
  if (values) {
    cudaMemcpy(vals.data(), d.buffer.data() + d.values_at, vals.size() * 4, cudaMemcpyDeviceToHost);
  }
  for (int64_t r = 0; r < m; ++r) {
    for (int32_t j = 0; j < k; ++j) {
      result.indices.push_back(indices[r * d.stride + j]);
      if (values) result.values.push_back(vals[r * d.stride + j]);
    }
  }
  return result;
}

void ExpectValuesMatch(const tools::PackedRows& rows, const client::SelectResult& result) {
  for (size_t r = 0; r < rows.lengths.size(); ++r) {
    for (int j = 0; j < result.k; ++j) {
      const int32_t i = result.indices[r * result.k + j];
      const float v = result.values[r * result.k + j];
      if (i < 0) {
        EXPECT_TRUE(std::isnan(v));
      } else {
        EXPECT_EQ(v, rows.scores[rows.offsets[r] + i]) << r << "," << j;
      }
    }
  }
}

TEST_F(CudaRegions, PitchedInPlaceOutputIsExact) {
  const int32_t k = 2048;
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 8, 131072, LengthPattern::kRandom, kSeed);
  absl::StatusOr<DeviceRows> d = Upload(rows, k);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(client::Register(*session_, "gpu", d->buffer).ok());
  client::RegionRowsRef ref;
  ref.scores = {"gpu", 0};
  ref.num_rows = 8;
  ref.row_pitch = d->pitch;
  ref.lengths = rows.lengths;
  const client::RegionOutputRef out{.indices = {"gpu", d->indices_at}};
  absl::StatusOr<client::SelectResult> reply = session_->Select(k, ref, &out, {.sorted = true});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(tools::Verify(rows, k, {.sorted = true}, Download(*d, 8, k, false)).ok());
}

TEST_F(CudaRegions, LengthsAndOffsetsOnTheGpuWithValuesAtAStride) {
  const int32_t k = 300;
  const tools::PackedRows rows =
      Rows(Distribution::kBf16Ties, 16, 20000, LengthPattern::kEdges, kSeed);
  absl::StatusOr<DeviceRows> d = Upload(rows, k + 5);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(client::Register(*session_, "gpu", d->buffer).ok());
  client::RegionRowsRef ref;
  ref.scores = {"gpu", 0};
  ref.num_rows = 16;
  ref.row_offsets = client::RegionSlice{"gpu", d->offsets_at};
  ref.lengths_ref = client::RegionSlice{"gpu", d->lengths_at};
  ref.width = static_cast<int32_t>(rows.width);
  client::RegionOutputRef out{.indices = {"gpu", d->indices_at}, .row_stride = k + 5};
  out.values = client::RegionSlice{"gpu", d->values_at};
  absl::StatusOr<client::SelectResult> reply =
      session_->Select(k, ref, &out, {.deterministic = true, .return_values = true});
  ASSERT_TRUE(reply.ok()) << reply.status();
  const client::SelectResult answer = Download(*d, 16, k, true);
  EXPECT_TRUE(tools::Verify(rows, k, {.deterministic = true}, answer).ok());
  ExpectValuesMatch(rows, answer);
  // The answer in the reply instead (values gathered on the server's GPU).
  absl::StatusOr<client::SelectResult> inline_answer =
      session_->Select(k, ref, nullptr, {.deterministic = true, .return_values = true});
  ASSERT_TRUE(inline_answer.ok()) << inline_answer.status();
  EXPECT_EQ(inline_answer->indices, answer.indices);
  ExpectValuesMatch(rows, *inline_answer);
}

TEST_F(CudaRegions, EventOrderedWithoutAHostSync) {
  const int32_t k = 256;
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, 4, 65536, LengthPattern::kFull, kSeed);
  absl::StatusOr<DeviceRows> d = Upload(rows, k);
  ASSERT_TRUE(d.ok()) << d.status();
  // Fresh rows written asynchronously on a client stream: only the event
  // orders them before the server's selection.
  cudaMemset(d->buffer.data(), 0, d->lengths_at);
  cudaDeviceSynchronize();
  absl::StatusOr<client::CudaIpcEvent> ready = client::CudaIpcEvent::Create(0);
  absl::StatusOr<client::CudaIpcEvent> done = client::CudaIpcEvent::Create(0);
  ASSERT_TRUE(ready.ok() && done.ok());
  ASSERT_TRUE(client::Register(*session_, "gpu", d->buffer).ok());
  ASSERT_TRUE(client::Register(*session_, "ready", *ready).ok());
  ASSERT_TRUE(client::Register(*session_, "done", *done).ok());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<float> pitched(rows.lengths.size() * d->pitch, std::nanf(""));
  for (size_t r = 0; r < rows.lengths.size(); ++r) {
    std::memcpy(pitched.data() + r * d->pitch, rows.scores.data() + rows.offsets[r],
                rows.lengths[r] * 4);
  }
  ASSERT_EQ(cudaMemcpyAsync(d->buffer.data(), pitched.data(), pitched.size() * 4,
                            cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ready->get(), stream), cudaSuccess);
  client::RegionRowsRef ref;
  ref.scores = {"gpu", 0};
  ref.num_rows = 4;
  ref.row_pitch = d->pitch;
  ref.lengths = rows.lengths;
  const client::RegionOutputRef out{.indices = {"gpu", d->indices_at}};
  const client::GpuOrderingRef ordering{.wait_event = "ready", .record_event = "done"};
  absl::StatusOr<client::SelectResult> reply = session_->Select(k, ref, &out, {}, &ordering);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(cudaStreamWaitEvent(stream, done->get(), 0), cudaSuccess);
  std::vector<int32_t> indices(4 * k);
  ASSERT_EQ(cudaMemcpyAsync(indices.data(), d->buffer.data() + d->indices_at, indices.size() * 4,
                            cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  client::SelectResult answer{.num_rows = 4, .k = k, .indices = indices};
  EXPECT_TRUE(tools::Verify(rows, k, {}, answer).ok());
}

TEST_F(CudaRegions, FaultsAreRefusedBeforeAnyLaunch) {
  absl::StatusOr<client::CudaIpcBuffer> buffer = client::CudaIpcBuffer::Create(1 << 20, 0);
  ASSERT_TRUE(buffer.ok());
  const client::GpuId gpu = buffer->gpu();
  const absl::Status too_big =
      session_->RegisterCudaIpc("big", buffer->ipc_handle(), 0, (1 << 20) + 4096, gpu);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument) << too_big;
  EXPECT_NE(too_big.message().find("exceeds the allocation"), std::string::npos) << too_big;
  const absl::Status short_handle =
      session_->RegisterCudaIpc("s", buffer->ipc_handle().substr(1), 0, 4096, gpu);
  EXPECT_EQ(short_handle.code(), absl::StatusCode::kInvalidArgument) << short_handle;
  const absl::Status garbage =
      session_->RegisterCudaIpc("g", std::string(64, '\x5a'), 0, 4096, gpu);
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument) << garbage;
  EXPECT_NE(garbage.message().find("cudaIpcOpenMemHandle"), std::string::npos) << garbage;
  const absl::Status wrong_gpu = session_->RegisterCudaIpc(
      "w", buffer->ipc_handle(), 0, 4096, {.uuid = "GPU-00000000-0000-0000-0000-000000000000"});
  EXPECT_EQ(wrong_gpu.code(), absl::StatusCode::kInvalidArgument) << wrong_gpu;
  ASSERT_TRUE(client::Register(*session_, "gpu", *buffer).ok());
  // Device lengths past the declared width: the selector refuses the row.
  const std::vector<int32_t> lengths = {100, 5000};
  cudaMemcpy(buffer->data() + 4096, lengths.data(), 8, cudaMemcpyHostToDevice);
  cudaMemset(buffer->data() + 8192, 0, 2 * 4096 * 4);
  client::RegionRowsRef ref;
  ref.scores = {"gpu", 8192};
  ref.num_rows = 2;
  ref.row_pitch = 4096;
  ref.lengths_ref = client::RegionSlice{"gpu", 4096};
  ref.width = 4000;
  absl::StatusOr<client::SelectResult> refused = session_->Select(8, ref);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("lengths[1]"), std::string::npos) << refused.status();
  // Without a width the server cannot bound rows whose lengths it never reads.
  ref.width = 0;
  EXPECT_EQ(session_->Select(8, ref).status().code(), absl::StatusCode::kInvalidArgument);
  // And the server still answers.
  const std::vector<int32_t> fine = {100, 4000};
  cudaMemcpy(buffer->data() + 4096, fine.data(), 8, cudaMemcpyHostToDevice);
  ref.width = 4000;
  EXPECT_TRUE(session_->Select(8, ref).ok());
}

// BF16 / FP16 rows on the GPU, 2-byte aligned (an odd pitch, element 0 at
// byte 2): every way values leave the CUDA backend, each in the rows' type:
// written in place at a stride (the output kernel), gathered on the device
// into the reply, and gathered on the host from inline rows.
TEST_F(CudaRegions, HalfPrecisionRowsWithValuesInTheirType) {
  const int32_t k = 200;
  const int64_t m = 6;
  const int64_t stride = k + 3;
  for (ScoreType dtype : {ScoreType::kBFloat16, ScoreType::kFloat16}) {
    const tools::PackedRows rows = tools::Generate({.distribution = Distribution::kBf16Ties,
                                                    .lengths = LengthPattern::kEdges,
                                                    .rows = m,
                                                    .width = 9000,
                                                    .k = k,
                                                    .seed = 5,
                                                    .dtype = dtype});
    const int64_t pitch = rows.width + 1;
    const uint64_t scores_at = 2;
    std::vector<uint16_t> pitched(m * pitch, 0x7fff);  // NaN in both types past each row
    for (int64_t r = 0; r < m; ++r) {
      std::memcpy(pitched.data() + r * pitch, rows.scores16.data() + rows.offsets[r],
                  rows.lengths[r] * 2);
    }
    const uint64_t indices_at = Align(scores_at + pitched.size() * 2);
    const uint64_t values_at = indices_at + Align(m * stride * 4) + 2;
    absl::StatusOr<client::CudaIpcBuffer> buffer =
        client::CudaIpcBuffer::Create(values_at + m * stride * 2, 0);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    std::byte* base = buffer->data();
    ASSERT_EQ(
        cudaMemcpy(base + scores_at, pitched.data(), pitched.size() * 2, cudaMemcpyHostToDevice),
        cudaSuccess);
    const std::string name = absl::StrCat("half-", std::string(ScoreTypeName(dtype)));
    ASSERT_TRUE(client::Register(*session_, name, *buffer).ok());
    client::RegionRowsRef ref;
    ref.scores = {name, scores_at};
    ref.num_rows = static_cast<int32_t>(m);
    ref.row_pitch = pitch;
    ref.lengths = rows.lengths;
    ref.dtype = tools::ToWire(dtype);
    const uint16_t nan = dtype == ScoreType::kBFloat16 ? 0x7fc0 : 0x7e00;
    const auto expect_values = [&](const std::vector<int32_t>& indices,
                                   const std::vector<uint16_t>& values, const char* path) {
      for (int64_t r = 0; r < m; ++r) {
        for (int32_t j = 0; j < k; ++j) {
          const int32_t i = indices[r * k + j];
          EXPECT_EQ(values[r * k + j], i < 0 ? nan : rows.scores16[rows.offsets[r] + i])
              << path << " " << ScoreTypeName(dtype) << " " << r << "," << j;
        }
      }
    };

    // In place, values at a stride.
    client::RegionOutputRef out{.indices = {name, indices_at}, .row_stride = stride};
    out.values = client::RegionSlice{name, values_at};
    absl::StatusOr<client::SelectResult> reply =
        session_->Select(k, ref, &out, {.sorted = true, .return_values = true});
    ASSERT_TRUE(reply.ok()) << reply.status();
    std::vector<int32_t> indices(m * stride);
    std::vector<uint16_t> values(m * stride);
    cudaMemcpy(indices.data(), base + indices_at, indices.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(values.data(), base + values_at, values.size() * 2, cudaMemcpyDeviceToHost);
    client::SelectResult placed{.num_rows = m, .k = k};
    std::vector<uint16_t> placed_values;
    for (int64_t r = 0; r < m; ++r) {
      placed.indices.insert(placed.indices.end(), indices.begin() + r * stride,
                            indices.begin() + r * stride + k);
      placed_values.insert(placed_values.end(), values.begin() + r * stride,
                           values.begin() + r * stride + k);
    }
    EXPECT_TRUE(tools::Verify(rows, k, {.sorted = true}, placed).ok()) << ScoreTypeName(dtype);
    expect_values(placed.indices, placed_values, "in place");

    // Rows on the GPU, answer in the reply: values gathered on the device.
    reply = session_->Select(k, ref, nullptr, {.sorted = true, .return_values = true});
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->values_dtype, tools::ToWire(dtype));
    EXPECT_TRUE(tools::Verify(rows, k, {.sorted = true}, *reply).ok()) << ScoreTypeName(dtype);
    expect_values(reply->indices, reply->values16, "reply");

    // Inline rows: values gathered on the host from the staged rows.
    reply = client_->Select(k, rows.view(), {.sorted = true, .return_values = true});
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_TRUE(tools::Verify(rows, k, {.sorted = true}, *reply).ok()) << ScoreTypeName(dtype);
    expect_values(reply->indices, reply->values16, "inline");
  }
}

// A channel driven from a CUDA stream by the C++ client (cuda_channel.h):
// calls enqueued with no host wait, eagerly and from a captured CUDA graph,
// each answer exact; a refused call leaves the output as it was. Prints the
// host cost of one EnqueueChannelCall.
TEST_F(CudaRegions, ChannelCallsFromAStreamAreExact) {
  const int32_t k = 2048;
  const int64_t m = 8;
  const tools::PackedRows rows =
      Rows(Distribution::kIndexer, m, 131072, LengthPattern::kRandom, kSeed);
  absl::StatusOr<DeviceRows> d = Upload(rows, k);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(client::Register(*session_, "gpu", d->buffer).ok());
  auto channel = client::Channel::Open(
      *session_,
      {.k = k, .max_rows = static_cast<int32_t>(m), .max_width = 131072, .regions = {"gpu"}});
  ASSERT_TRUE(channel.ok()) << channel.status();
  ASSERT_TRUE(client::RegisterChannelForStreams(**channel).ok());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const topk_channel_descriptor call{.num_rows = static_cast<uint32_t>(m),
                                     .values_region = TOPK_CHANNEL_NO_REGION,
                                     .row_pitch = static_cast<uint64_t>(d->pitch),
                                     .lengths_offset = d->lengths_at,
                                     .indices_offset = d->indices_at};
  constexpr int kCalls = 200;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(client::EnqueueChannelCall(**channel, stream, call).ok());
  }
  const double host_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      kCalls;
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::printf("EnqueueChannelCall: %.1f us of host time per call (%d calls)\n", host_us, kCalls);
  EXPECT_TRUE((*channel)->LastStatus().ok()) << (*channel)->LastStatus();
  const client::SelectResult answer = Download(*d, m, k, false);
  EXPECT_TRUE(tools::Verify(rows, k, {}, answer).ok());

  // Refused: more rows than the channel's cap; the output stays as it was.
  topk_channel_descriptor bad = call;
  bad.num_rows = static_cast<uint32_t>(m + 1);
  ASSERT_TRUE(client::EnqueueChannelCall(**channel, stream, bad).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ((*channel)->LastStatus().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Download(*d, m, k, false).indices, answer.indices);

  // The same call captured in a CUDA graph and replayed.
  cudaMemset(d->buffer.data() + d->indices_at, 0x7e, m * k * sizeof(int32_t));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status captured = client::EnqueueChannelCall(**channel, stream, call);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE((*channel)->LastStatus().ok()) << (*channel)->LastStatus();
  EXPECT_TRUE(tools::Verify(rows, k, {}, Download(*d, m, k, false)).ok());
  // The server counts a call once its poller sees it finished.
  const uint64_t made = kCalls + 1 + 10;
  for (int i = 0; i < 100 && (*channel)->calls() < made; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ((*channel)->calls(), made);
  EXPECT_EQ((*channel)->errors(), 1u);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  EXPECT_TRUE(client::UnregisterChannelForStreams(**channel).ok());
}

}  // namespace
}  // namespace topk::server::test
