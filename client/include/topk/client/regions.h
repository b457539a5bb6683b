// Zero-copy Select for co-located clients: rows, lengths and outputs live in
// memory shared with the server (a POSIX shared-memory segment here; CUDA
// allocations in topk/client/cuda_regions.h) and travel by reference.
//
//   auto session = topk::client::RegionSession::Open(*client);     // holds the regions
//   auto shm = topk::client::SharedMemorySegment::Create("/my-rows", bytes);
//   (*session)->Register("rows", *shm);
//   RegionRowsRef rows{.scores = {"rows", 0}, .num_rows = m, .row_pitch = n, .lengths = lengths};
//   RegionOutputRef out{.indices = {"rows", out_offset}};
//   (*session)->Select(k, rows, &out);   // indices are in the segment on return
//
// Ordering: the inputs must be written before Select is called, and the
// output is complete when it returns. The server must run --enable_regions
// and see this client as local (loopback or a unix socket).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "topk/client/client.h"
#include "topk/v1/topk.grpc.pb.h"

namespace grpc {
class ClientContext;
template <class R>
class ClientReader;
template <class W, class R>
class ClientReaderWriter;
}  // namespace grpc

namespace topk::client {

// A POSIX shared-memory object this process creates (shm_open, exclusive)
// and maps read-write; unmapped and unlinked on destruction.
class SharedMemorySegment {
 public:
  // `name`: "/" and up to 254 characters without another "/".
  static absl::StatusOr<SharedMemorySegment> Create(std::string name, size_t bytes);
  SharedMemorySegment() = default;  // empty: maps nothing
  ~SharedMemorySegment();
  SharedMemorySegment(SharedMemorySegment&& other) noexcept;
  SharedMemorySegment& operator=(SharedMemorySegment&& other) noexcept;
  SharedMemorySegment(const SharedMemorySegment&) = delete;
  SharedMemorySegment& operator=(const SharedMemorySegment&) = delete;

  const std::string& name() const { return name_; }
  size_t size() const { return bytes_; }
  std::byte* data() const { return data_; }
  template <typename T>
  T* at(size_t byte_offset) const {
    return reinterpret_cast<T*>(data_ + byte_offset);
  }

 private:
  SharedMemorySegment(std::string name, std::byte* data, size_t bytes)
      : name_(std::move(name)), data_(data), bytes_(bytes) {}
  void Reset();
  std::string name_;
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

// A place in a registered region: `offset` bytes from its start.
struct RegionSlice {
  std::string region;
  uint64_t offset = 0;
};

// Rows by reference (see topk.proto, RegionRows): pitched when row_pitch > 0,
// else packed with int64 element offsets in `row_offsets`; lengths inline or
// in `lengths_ref` (then `width` bounds every length). Offsets, pitch and
// width count elements of `dtype` (2 bytes for BF16 / FP16, 4 for FP32).
struct RegionRowsRef {
  RegionSlice scores;
  int32_t num_rows = 0;
  int64_t row_pitch = 0;
  std::optional<RegionSlice> row_offsets;
  std::vector<int32_t> lengths;
  std::optional<RegionSlice> lengths_ref;
  int32_t width = 0;
  v1::ScoreType dtype = v1::SCORE_TYPE_FP32;
};

// Where the server writes the answer (RegionOutput): row r's K indices at
// element r * row_stride (0: K) of `indices`, values likewise when set.
struct RegionOutputRef {
  RegionSlice indices;
  std::optional<RegionSlice> values;
  int64_t row_stride = 0;
};

// CUDA event regions to wait on before and record after the selection.
struct GpuOrderingRef {
  std::string wait_event;
  std::string record_event;
};

// A GPU as the server should find it: by UUID ("GPU-..."), else by ordinal
// in the server's process.
struct GpuId {
  std::string uuid;
  int32_t ordinal = 0;
};

// SelectPipeline: one stream kept open, whole requests (typically by
// reference) sent back to back, one reply each in completion order. A request
// that fails gets a reply with its status; the stream goes on. Send and
// Receive may run on two threads at once (one each); the stream is not for
// several senders.
class SelectPipeline {
 public:
  static absl::StatusOr<std::unique_ptr<SelectPipeline>> Open(
      std::shared_ptr<grpc::Channel> channel);
  ~SelectPipeline();  // half-closes and waits for the replies still due
  SelectPipeline(const SelectPipeline&) = delete;
  SelectPipeline& operator=(const SelectPipeline&) = delete;

  // Queues one request (blocks only on flow control). An error means the
  // stream itself is broken (its status).
  absl::Status Send(const v1::SelectRequest& request);
  // The next reply (blocks). An error means the stream itself is broken.
  absl::StatusOr<v1::SelectReply> Receive();
  // Send, then Receive its reply, as a result (the request's own error as
  // the status). Nothing else may be in flight.
  absl::StatusOr<SelectResult> Call(const v1::SelectRequest& request);
  // False once Send or Receive saw the stream break.
  bool healthy() const { return healthy_; }

 private:
  SelectPipeline() = default;
  absl::Status Broken();
  std::unique_ptr<v1::TopK::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SelectRequest, v1::SelectReply>> stream_;
  bool healthy_ = true;
  bool half_closed_ = false;
};

// A reply as a client result: the request's status, else the answer
// (indices empty when the request's output was by reference).
absl::StatusOr<SelectResult> ToResult(const v1::SelectReply& reply, bool output_by_reference);

// How a RegionSession sends its Selects: on a SelectPipeline stream it keeps
// open (the default; the lighter path), or one unary Select per request.
enum class CallPath { kStream, kUnary };

// A region session: the OpenSession stream, held open for the object's
// lifetime. Regions registered through it are the server's to release when
// it ends (destruction, process exit or crash).
class RegionSession {
 public:
  static absl::StatusOr<std::unique_ptr<RegionSession>> Open(const Client& client,
                                                             CallPath path = CallPath::kStream);
  ~RegionSession();
  RegionSession(const RegionSession&) = delete;
  RegionSession& operator=(const RegionSession&) = delete;

  const std::string& id() const { return id_; }
  // The gRPC channel the session's calls go over (for channels: channel.h).
  const std::shared_ptr<grpc::Channel>& grpc_channel() const { return channel_; }

  absl::Status RegisterShm(const std::string& name, const std::string& shm_name, uint64_t offset,
                           uint64_t byte_size);
  // The whole segment.
  absl::Status Register(const std::string& name, const SharedMemorySegment& segment);
  absl::Status RegisterCudaIpc(const std::string& name, absl::string_view ipc_handle,
                               uint64_t offset, uint64_t byte_size, const GpuId& device);
  absl::Status RegisterCudaEvent(const std::string& name, absl::string_view ipc_event_handle,
                                 const GpuId& device);
  absl::Status Register(const v1::RegisterRegionRequest& request);

  absl::Status Unregister(const std::string& name);
  absl::StatusOr<int> UnregisterAll();
  absl::StatusOr<std::vector<v1::RegionInfo>> List();

  // The request Select sends (callers replaying it reuse it).
  v1::SelectRequest MakeRequest(int32_t k, const RegionRowsRef& rows, const RegionOutputRef* output,
                                const CallOptions& options,
                                const GpuOrderingRef* ordering = nullptr) const;

  // Select by reference. With `output`, the answer is in that region when
  // this returns and the result's indices/values are empty; without it,
  // they are in the result as for an inline Select. On the stream path
  // (reopened after it broke) options.timeout does not apply, and calls
  // from several threads take turns on the one stream (for requests in
  // parallel, give each thread a SelectPipeline of its own).
  absl::StatusOr<SelectResult> Select(int32_t k, const RegionRowsRef& rows,
                                      const RegionOutputRef* output = nullptr,
                                      const CallOptions& options = {},
                                      const GpuOrderingRef* ordering = nullptr);
  absl::StatusOr<SelectResult> Select(const v1::SelectRequest& request,
                                      const CallOptions& options = {});

 private:
  RegionSession(std::shared_ptr<grpc::Channel> channel, CallPath path);
  std::shared_ptr<grpc::Channel> channel_;
  CallPath path_;
  std::mutex pipeline_mutex_;  // guards pipeline_
  std::unique_ptr<SelectPipeline> pipeline_;
  std::unique_ptr<v1::TopK::Stub> stub_;
  std::unique_ptr<Client> selects_;
  std::unique_ptr<grpc::ClientContext> stream_context_;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> stream_;
  std::string id_;
};

}  // namespace topk::client
