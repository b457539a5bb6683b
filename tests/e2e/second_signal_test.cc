// topk-server as a process: a second SIGTERM while the drain waits for a call
// in flight ends the drain at once. The process exits 0 well before
// --drain_deadline, and the call it cut short gets UNAVAILABLE (the server
// went away; a retry goes to another replica), never a hang or an OK.
#include <atomic>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "support/raw_calls.h"
#include "support/server_process.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

TEST(SecondSignal, EndsTheDrainAndExitsZero) {
  ServerProcess server({"--drain_deadline=60s"});
  ASSERT_GT(server.pid(), 0);
  auto client = *client::Client::Connect({.target = server.target()});
  ASSERT_TRUE(client->WaitForServing(absl::Seconds(20)).ok());

  // An upload that sends a chunk every 100 ms for a minute: the drain waits
  // for it up to the whole deadline.
  std::atomic<bool> started{false};
  grpc::Status uploading;
  std::thread stream([&] {
    uploading = OpenStream(client->channel(), 4, 600, absl::Milliseconds(100), &started);
  });
  ASSERT_NO_FATAL_FAILURE(WaitFor(started, absl::Seconds(10)));

  server.Signal(SIGTERM);
  // The first signal starts the drain; the upload holds it.
  EXPECT_FALSE(server.WaitExit(absl::Seconds(1.5)).has_value())
      << "the server exited although a call was in flight";
  absl::StatusOr<bool> serving = client->IsServing();
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_FALSE(*serving) << "health must be NOT_SERVING during the drain";

  const absl::Time second = absl::Now();
  server.Signal(SIGTERM);
  const std::optional<int> status = server.WaitExit(absl::Seconds(20));
  const absl::Duration took = absl::Now() - second;
  RecordProperty("exit_after_second_signal_ms", std::to_string(absl::ToInt64Milliseconds(took)));
  ASSERT_TRUE(status.has_value()) << "still running 20 s after the second SIGTERM";
  EXPECT_LT(took, absl::Seconds(5)) << "exit took " << took << " after the second SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 0);

  stream.join();
  EXPECT_EQ(uploading.error_code(), grpc::StatusCode::UNAVAILABLE)
      << uploading.error_code() << ": " << uploading.error_message();
}

}  // namespace
}  // namespace topk::server::test
