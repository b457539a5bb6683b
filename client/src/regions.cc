#include "topk/client/regions.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "openssl/evp.h"

namespace topk::client {
namespace {

void SetSlice(const RegionSlice& slice, v1::RegionRef& out) {
  out.set_region(slice.region);
  out.set_offset(slice.offset);
}

void SetDevice(const GpuId& device, v1::GpuDevice& out) {
  out.set_uuid(device.uuid);
  out.set_ordinal(device.ordinal);
}

// The server maps a shared-memory object only once it holds the session's
// ownership proof (docs/regions.md, "Trust model"): 16 bytes of
// SHA-256("topk-shm-ownership\0" + session id), at the registered offset when
// they fit before the object's end, else in its last 16 bytes. This process
// writes them through its own descriptor for the registration and puts the
// bytes they replaced back afterwards; an object it cannot open read-write
// goes without, and the server refuses it.
constexpr size_t kProofBytes = 16;

class OwnershipProof {
 public:
  OwnershipProof(const std::string& shm_name, uint64_t offset, absl::string_view session_id) {
    fd_ = shm_open(shm_name.c_str(), O_RDWR, 0);
    struct stat info {};
    if (fd_ < 0 || fstat(fd_, &info) != 0 || static_cast<uint64_t>(info.st_size) < kProofBytes) {
      return;
    }
    const auto size = static_cast<uint64_t>(info.st_size);
    const uint64_t at = offset <= size - kProofBytes ? offset : size - kProofBytes;
    std::string input = "topk-shm-ownership";
    input.push_back('\0');
    input.append(session_id.data(), session_id.size());
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_Digest(input.data(), input.size(), digest, &length, EVP_sha256(), nullptr) != 1 ||
        pread(fd_, saved_, kProofBytes, static_cast<off_t>(at)) !=
            static_cast<ssize_t>(kProofBytes) ||
        pwrite(fd_, digest, kProofBytes, static_cast<off_t>(at)) !=
            static_cast<ssize_t>(kProofBytes)) {
      return;
    }
    at_ = static_cast<off_t>(at);
  }
  ~OwnershipProof() {
    if (at_ >= 0) {
      // A short write: the object shrank meanwhile, and nothing of it is
      // left to restore.
      [[maybe_unused]] const ssize_t restored = pwrite(fd_, saved_, kProofBytes, at_);
    }
    if (fd_ >= 0) close(fd_);
  }
  OwnershipProof(const OwnershipProof&) = delete;
  OwnershipProof& operator=(const OwnershipProof&) = delete;

 private:
  int fd_ = -1;
  off_t at_ = -1;
  char saved_[kProofBytes] = {};
};

}  // namespace

absl::StatusOr<SharedMemorySegment> SharedMemorySegment::Create(std::string name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm_open('", name, "'): ", std::strerror(errno)));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("ftruncate('", name, "', ", bytes, "): ", std::strerror(error)));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);  // the mapping keeps the object alive
  if (data == MAP_FAILED) {
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap('", name, "', ", bytes, "): ", std::strerror(error)));
  }
  return SharedMemorySegment(std::move(name), static_cast<std::byte*>(data), bytes);
}

SharedMemorySegment::~SharedMemorySegment() { Reset(); }

SharedMemorySegment::SharedMemorySegment(SharedMemorySegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

SharedMemorySegment& SharedMemorySegment::operator=(SharedMemorySegment&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void SharedMemorySegment::Reset() {
  if (data_ == nullptr) return;
  munmap(data_, bytes_);
  // The server's own mapping (if registered) stays valid until it unmaps.
  shm_unlink(name_.c_str());
  data_ = nullptr;
}

RegionSession::RegionSession(std::shared_ptr<grpc::Channel> channel, CallPath path)
    : channel_(std::move(channel)),
      path_(path),
      stub_(v1::TopK::NewStub(channel_)),
      selects_(std::make_unique<Client>(channel_)) {}

absl::StatusOr<std::unique_ptr<RegionSession>> RegionSession::Open(const Client& client,
                                                                   CallPath path) {
  auto session = std::unique_ptr<RegionSession>(new RegionSession(client.channel(), path));
  session->stream_context_ = std::make_unique<grpc::ClientContext>();
  session->stream_ =
      session->stub_->OpenSession(session->stream_context_.get(), v1::OpenSessionRequest());
  v1::SessionEvent event;
  if (!session->stream_->Read(&event)) {
    const grpc::Status status = session->stream_->Finish();
    session->stream_.reset();
    return status.ok() ? absl::UnavailableError("OpenSession: the stream ended without an id")
                       : ToAbsl(status);
  }
  session->id_ = event.session_id();
  return session;
}

RegionSession::~RegionSession() {
  {
    std::lock_guard lock(pipeline_mutex_);
    pipeline_.reset();  // its requests name the session: done before it ends
  }
  if (stream_ != nullptr) {
    // Ending the stream is what releases the session's regions.
    stream_context_->TryCancel();
    v1::SessionEvent ignored;
    while (stream_->Read(&ignored)) {
    }
    stream_->Finish();
  }
}

absl::Status RegionSession::Register(const v1::RegisterRegionRequest& request) {
  grpc::ClientContext context;
  v1::RegisterRegionResponse response;
  return ToAbsl(stub_->RegisterRegion(&context, request, &response));
}

absl::Status RegionSession::RegisterShm(const std::string& name, const std::string& shm_name,
                                        uint64_t offset, uint64_t byte_size) {
  v1::RegisterRegionRequest request;
  request.set_session_id(id_);
  request.set_name(name);
  request.mutable_shm()->set_shm_name(shm_name);
  request.mutable_shm()->set_offset(offset);
  request.mutable_shm()->set_byte_size(byte_size);
  const OwnershipProof proof(shm_name, offset, id_);
  return Register(request);
}

absl::Status RegionSession::Register(const std::string& name, const SharedMemorySegment& segment) {
  return RegisterShm(name, segment.name(), 0, segment.size());
}

absl::Status RegionSession::RegisterCudaIpc(const std::string& name, absl::string_view ipc_handle,
                                            uint64_t offset, uint64_t byte_size,
                                            const GpuId& device) {
  v1::RegisterRegionRequest request;
  request.set_session_id(id_);
  request.set_name(name);
  v1::CudaIpcRegion* region = request.mutable_cuda_ipc();
  region->set_ipc_handle(std::string(ipc_handle));
  region->set_offset(offset);
  region->set_byte_size(byte_size);
  SetDevice(device, *region->mutable_device());
  return Register(request);
}

absl::Status RegionSession::RegisterCudaEvent(const std::string& name,
                                              absl::string_view ipc_event_handle,
                                              const GpuId& device) {
  v1::RegisterRegionRequest request;
  request.set_session_id(id_);
  request.set_name(name);
  request.mutable_cuda_event()->set_ipc_event_handle(std::string(ipc_event_handle));
  SetDevice(device, *request.mutable_cuda_event()->mutable_device());
  return Register(request);
}

absl::Status RegionSession::Unregister(const std::string& name) {
  grpc::ClientContext context;
  v1::UnregisterRegionRequest request;
  request.set_session_id(id_);
  request.set_name(name);
  v1::UnregisterRegionResponse response;
  return ToAbsl(stub_->UnregisterRegion(&context, request, &response));
}

absl::StatusOr<int> RegionSession::UnregisterAll() {
  grpc::ClientContext context;
  v1::UnregisterRegionRequest request;
  request.set_session_id(id_);
  request.set_all(true);
  v1::UnregisterRegionResponse response;
  if (grpc::Status s = stub_->UnregisterRegion(&context, request, &response); !s.ok()) {
    return ToAbsl(s);
  }
  return response.unregistered();
}

absl::StatusOr<std::vector<v1::RegionInfo>> RegionSession::List() {
  grpc::ClientContext context;
  v1::ListRegionsRequest request;
  request.set_session_id(id_);
  v1::ListRegionsResponse response;
  if (grpc::Status s = stub_->ListRegions(&context, request, &response); !s.ok()) {
    return ToAbsl(s);
  }
  return std::vector<v1::RegionInfo>(response.regions().begin(), response.regions().end());
}

v1::SelectRequest RegionSession::MakeRequest(int32_t k, const RegionRowsRef& rows,
                                             const RegionOutputRef* output,
                                             const CallOptions& options,
                                             const GpuOrderingRef* ordering) const {
  v1::SelectRequest request;
  request.set_k(k);
  request.mutable_options()->set_sorted(options.sorted);
  request.mutable_options()->set_deterministic(options.deterministic);
  request.mutable_options()->set_return_values(options.return_values);
  request.set_request_id(options.request_id);
  request.set_session_id(id_);
  v1::RegionRows* region_rows = request.mutable_region_rows();
  SetSlice(rows.scores, *region_rows->mutable_scores());
  region_rows->set_num_rows(rows.num_rows);
  if (rows.row_offsets.has_value()) {
    SetSlice(*rows.row_offsets, *region_rows->mutable_row_offsets());
  } else {
    region_rows->set_row_pitch(rows.row_pitch);
  }
  region_rows->mutable_lengths()->Add(rows.lengths.begin(), rows.lengths.end());
  if (rows.lengths_ref.has_value())
    SetSlice(*rows.lengths_ref, *region_rows->mutable_lengths_ref());
  region_rows->set_width(rows.width);
  region_rows->set_dtype(rows.dtype);
  if (output != nullptr) {
    v1::RegionOutput* out = request.mutable_output();
    SetSlice(output->indices, *out->mutable_indices());
    if (output->values.has_value()) SetSlice(*output->values, *out->mutable_values());
    out->set_row_stride(output->row_stride);
  }
  if (ordering != nullptr) {
    request.mutable_ordering()->set_wait_event(ordering->wait_event);
    request.mutable_ordering()->set_record_event(ordering->record_event);
  }
  return request;
}

absl::StatusOr<SelectResult> RegionSession::Select(int32_t k, const RegionRowsRef& rows,
                                                   const RegionOutputRef* output,
                                                   const CallOptions& options,
                                                   const GpuOrderingRef* ordering) {
  return Select(MakeRequest(k, rows, output, options, ordering), options);
}

absl::StatusOr<SelectResult> RegionSession::Select(const v1::SelectRequest& request,
                                                   const CallOptions& options) {
  if (path_ == CallPath::kUnary) return selects_->Select(request, options);
  std::lock_guard lock(pipeline_mutex_);
  if (pipeline_ == nullptr || !pipeline_->healthy()) {
    // A stream the server ended (idle past its timeout, a restart) is
    // replaced; the request had not been sent on it.
    absl::StatusOr<std::unique_ptr<SelectPipeline>> opened = SelectPipeline::Open(channel_);
    if (!opened.ok()) return opened.status();
    pipeline_ = *std::move(opened);
  }
  return pipeline_->Call(request);
}

absl::StatusOr<std::unique_ptr<SelectPipeline>> SelectPipeline::Open(
    std::shared_ptr<grpc::Channel> channel) {
  auto pipeline = std::unique_ptr<SelectPipeline>(new SelectPipeline());
  pipeline->stub_ = v1::TopK::NewStub(channel);
  pipeline->context_ = std::make_unique<grpc::ClientContext>();
  pipeline->stream_ = pipeline->stub_->SelectPipeline(pipeline->context_.get());
  if (pipeline->stream_ == nullptr) return absl::UnavailableError("SelectPipeline: no stream");
  return pipeline;
}

SelectPipeline::~SelectPipeline() {
  if (stream_ == nullptr) return;
  if (healthy_ && !half_closed_) stream_->WritesDone();
  v1::SelectReply ignored;
  while (stream_->Read(&ignored)) {
  }
  stream_->Finish();
}

absl::Status SelectPipeline::Broken() {
  healthy_ = false;
  if (!half_closed_) {
    half_closed_ = true;
    stream_->WritesDone();
  }
  // Replies still due are dropped: the stream is gone.
  v1::SelectReply ignored;
  while (stream_->Read(&ignored)) {
  }
  const grpc::Status status = stream_->Finish();
  stream_.reset();
  if (status.ok()) return absl::UnavailableError("SelectPipeline: the server ended the stream");
  return ToAbsl(status);
}

absl::Status SelectPipeline::Send(const v1::SelectRequest& request) {
  if (!healthy_) return absl::FailedPreconditionError("SelectPipeline: the stream is broken");
  if (!stream_->Write(request)) return Broken();
  return absl::OkStatus();
}

absl::StatusOr<v1::SelectReply> SelectPipeline::Receive() {
  if (!healthy_) return absl::FailedPreconditionError("SelectPipeline: the stream is broken");
  v1::SelectReply reply;
  if (!stream_->Read(&reply)) return Broken();
  return reply;
}

absl::StatusOr<SelectResult> SelectPipeline::Call(const v1::SelectRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status sent = Send(request); !sent.ok()) return sent;
  absl::StatusOr<v1::SelectReply> reply = Receive();
  if (!reply.ok()) return reply.status();
  absl::StatusOr<SelectResult> result = ToResult(*reply, request.has_output());
  if (result.ok()) {
    result->client_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  }
  return result;
}

absl::StatusOr<SelectResult> ToResult(const v1::SelectReply& reply, bool output_by_reference) {
  if (reply.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(reply.code()), reply.message());
  }
  return output_by_reference ? DecodeReferenceResponse(reply.response())
                             : DecodeResponse(reply.response());
}

}  // namespace topk::client
