// Calls with hand-made bytes on the wire (gRPC's generic stub): what a
// broken or hostile client sends, which the generated stubs cannot produce
// (unparseable messages, non-UTF-8 strings).
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "topk/v1/topk.pb.h"

namespace topk::server::test {

inline grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

inline std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

struct RawReply {
  grpc::Status status;
  std::string response;  // the response message's bytes when OK
};

// One unary call of `method` ("/topk.v1.TopK/GetStats") with `request` as
// the message bytes.
inline RawReply RawUnary(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                         const std::string& request, absl::Duration timeout = absl::Seconds(30)) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::CompletionQueue queue;
  grpc::ByteBuffer response;
  RawReply reply;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, method, ToByteBuffer(request), &queue);
  call->StartCall();
  call->Finish(&response, &reply.status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  queue.Next(&tag, &ok);
  if (reply.status.ok()) reply.response = ToString(response);
  return reply;
}

// One client-streaming call of `method` that writes `messages` (bytes each),
// half-closes when `half_close`, and waits for the answer. `after_writes`
// runs once every message is written, before the half-close (e.g. to cancel).
inline RawReply RawClientStream(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& method, const std::vector<std::string>& messages,
                                bool half_close = true,
                                absl::Duration timeout = absl::Seconds(30)) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::CompletionQueue queue;
  RawReply reply;
  void* tag = nullptr;
  bool ok = false;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &queue);
  call->StartCall(reinterpret_cast<void*>(1));
  queue.Next(&tag, &ok);
  for (const std::string& message : messages) {
    if (!ok) break;
    call->Write(ToByteBuffer(message), reinterpret_cast<void*>(2));
    queue.Next(&tag, &ok);
  }
  if (ok && half_close) {
    call->WritesDone(reinterpret_cast<void*>(3));
    queue.Next(&tag, &ok);
  }
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  queue.Next(&tag, &ok);
  if (ok) reply.response = ToString(response);
  call->Finish(&reply.status, reinterpret_cast<void*>(5));
  queue.Next(&tag, &ok);
  return reply;
}

// A SelectStream that sends a first chunk of `first_bytes` score bytes (k =
// 1, rows of up to 16384 floats), sets `started`, then `more` one-row chunks
// `gap` apart, and never half-closes: an upload in progress, or (more = 0)
// an idle stream. Returns the status the server ended it with.
inline grpc::Status OpenStream(const std::shared_ptr<grpc::Channel>& channel, int64_t first_bytes,
                               int more, absl::Duration gap, std::atomic<bool>* started) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  grpc::CompletionQueue queue;
  void* tag = nullptr;
  bool ok = false;
  auto call = stub.PrepareCall(&context, "/topk.v1.TopK/SelectStream", &queue);
  call->StartCall(reinterpret_cast<void*>(1));
  queue.Next(&tag, &ok);
  v1::SelectChunk chunk;
  chunk.set_k(1);
  for (int64_t left = first_bytes / 4; left > 0; left -= 16384) {
    chunk.add_lengths(static_cast<int32_t>(std::min<int64_t>(left, 16384)));
  }
  chunk.set_scores(std::string(static_cast<size_t>(first_bytes / 4 * 4), '\x01'));
  call->Write(ToByteBuffer(chunk.SerializeAsString()), reinterpret_cast<void*>(2));
  queue.Next(&tag, &ok);
  started->store(true);
  v1::SelectChunk next;
  next.add_lengths(1);
  next.set_scores(std::string(4, '\x01'));
  for (int i = 0; i < more && ok; ++i) {
    absl::SleepFor(gap);
    call->Write(ToByteBuffer(next.SerializeAsString()), reinterpret_cast<void*>(2));
    queue.Next(&tag, &ok);
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(3));
  queue.Next(&tag, &ok);
  return status;
}

}  // namespace topk::server::test
