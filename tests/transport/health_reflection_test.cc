// grpc.health.v1 transitions and server reflection.
#include <thread>

#include "absl/strings/match.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/raw_calls.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using grpc::health::v1::HealthCheckResponse;

TEST(Health, ServingAfterStartForTheServerAndTheService) {
  TestServer t = StartServer();
  EXPECT_TRUE(*t.client->IsServing(""));
  EXPECT_TRUE(*t.client->IsServing("topk.v1.TopK"));
  EXPECT_EQ(t.client->IsServing("no.such.Service").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(t.client->WaitForServing(absl::Seconds(5)).ok());
}

TEST(Health, GoesNotServingWhenDraining) {
  TestServer t = StartServer();
  auto stub = grpc::health::v1::Health::NewStub(t.client->channel());
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("topk.v1.TopK");
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> watch = stub->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  // The watch itself is in flight, so the drain waits for it until the
  // deadline; meanwhile the watcher must see NOT_SERVING.
  std::thread stopper([&] { t.server->Shutdown(absl::Seconds(10)); });
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  context.TryCancel();
  while (watch->Read(&response)) {
  }
  watch->Finish();
  stopper.join();
}

// Reflection through a raw bidi call: the request is hand-encoded
// (ServerReflectionRequest{list_services: ""} is field 7, empty string) and
// the answer only needs to contain the service names.
TEST(Reflection, ListsTheService) {
  TestServer t = StartServer();
  RawStream call(t.client->channel(),
                 "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
  ASSERT_TRUE(call.started());
  ASSERT_TRUE(call.Write(std::string("\x3a\x00", 2)));
  const std::optional<std::string> answer = call.Read();
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(absl::StrContains(*answer, "topk.v1.TopK")) << *answer;
  EXPECT_TRUE(absl::StrContains(*answer, "grpc.health.v1.Health"));
  call.WritesDone();
  const grpc::Status status = call.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace topk::server::test
