// Calls with hand-made bytes on the wire (gRPC's generic stub): what a
// broken or hostile client sends, which the generated stubs cannot produce
// (unparseable messages, non-UTF-8 strings), and streams driven one step at
// a time (a stream left open, an upload cut off, replies read one by one).
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
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

// One streaming call of any method ("/topk.v1.TopK/SelectStream",
// "/grpc.health.v1.Health/Watch", ...) with raw message bytes, each step
// waited for on the call's own completion queue. A step returns false once
// the stream is broken or ended; Finish() then gives the status.
class RawStream {
 public:
  RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
            absl::Duration timeout = absl::Seconds(30))
      : stub_(channel) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    call_ = stub_.PrepareCall(&context_, method, &queue_);
    call_->StartCall(Tag());
    started_ = Next();
  }
  ~RawStream() {
    queue_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (queue_.Next(&tag, &ok)) {
    }
  }
  RawStream(const RawStream&) = delete;
  RawStream& operator=(const RawStream&) = delete;

  // Whether the call started (the server may still end it at once).
  bool started() const { return started_; }
  bool Write(const std::string& bytes) {
    call_->Write(ToByteBuffer(bytes), Tag());
    return Next();
  }
  // The half-close: no more messages from this side.
  bool WritesDone() {
    call_->WritesDone(Tag());
    return Next();
  }
  // The next message's bytes; nullopt once the server ended the stream.
  std::optional<std::string> Read() {
    grpc::ByteBuffer bytes;
    call_->Read(&bytes, Tag());
    if (!Next()) return std::nullopt;
    return ToString(bytes);
  }
  void Cancel() { context_.TryCancel(); }
  // The status the call ended with (once every step above has completed).
  grpc::Status Finish() {
    grpc::Status status;
    call_->Finish(&status, Tag());
    Next();
    return status;
  }

 private:
  // Steps run one at a time, so one tag does for all of them.
  void* Tag() { return this; }
  bool Next() {
    void* tag = nullptr;
    bool ok = false;
    return queue_.Next(&tag, &ok) && ok;
  }

  // In this order: the call goes before its queue and context.
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::CompletionQueue queue_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
};

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
// half-closes when `half_close`, and waits for the answer.
inline RawReply RawClientStream(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& method, const std::vector<std::string>& messages,
                                bool half_close = true,
                                absl::Duration timeout = absl::Seconds(30)) {
  RawStream stream(channel, method, timeout);
  bool ok = stream.started();
  for (const std::string& message : messages) {
    if (!ok) break;
    ok = stream.Write(message);
  }
  if (ok && half_close) stream.WritesDone();
  RawReply reply;
  if (std::optional<std::string> response = stream.Read()) reply.response = *std::move(response);
  reply.status = stream.Finish();
  return reply;
}

// A SelectStream that sends a first chunk of `first_bytes` score bytes (k =
// 1, rows of up to 16384 floats), sets `started`, then `more` one-row chunks
// `gap` apart, and never half-closes: an upload in progress, or (more = 0)
// an idle stream. Returns the status the server ended it with.
inline grpc::Status OpenStream(const std::shared_ptr<grpc::Channel>& channel, int64_t first_bytes,
                               int more, absl::Duration gap, std::atomic<bool>* started) {
  RawStream stream(channel, "/topk.v1.TopK/SelectStream", absl::Seconds(60));
  v1::SelectChunk chunk;
  chunk.set_k(1);
  for (int64_t left = first_bytes / 4; left > 0; left -= 16384) {
    chunk.add_lengths(static_cast<int32_t>(std::min<int64_t>(left, 16384)));
  }
  chunk.set_scores(std::string(static_cast<size_t>(first_bytes / 4 * 4), '\x01'));
  bool ok = stream.Write(chunk.SerializeAsString());
  started->store(true);
  v1::SelectChunk next;
  next.add_lengths(1);
  next.set_scores(std::string(4, '\x01'));
  for (int i = 0; i < more && ok; ++i) {
    absl::SleepFor(gap);
    ok = stream.Write(next.SerializeAsString());
  }
  return stream.Finish();
}

// Waits up to `timeout` for `flag` (OpenStream's `started`), failing the
// test when it is not set by then.
inline void WaitFor(const std::atomic<bool>& flag, absl::Duration timeout = absl::Seconds(5)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!flag.load() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(flag.load());
}

}  // namespace topk::server::test
