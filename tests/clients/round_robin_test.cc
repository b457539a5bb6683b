// Client-side load balancing over three replicas on loopback: one channel
// with round_robin over "ipv4:a,b,c" spreads calls over all three (each
// server's own request count), every answer exact. When one replica turns
// lame duck, health checking (healthCheckConfig) takes it out of the
// rotation: once it is NOT_SERVING the client gets only OK answers, from the
// other two.
#include <array>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

uint64_t Requests(client::Client& client) {
  absl::StatusOr<v1::Stats> stats = client.GetStats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? stats->requests() : 0;
}

TEST(RoundRobin, SpreadsOverThreeReplicasAndSkipsOneInItsDrain) {
  std::array<TestServer, 3> servers = {StartServer(), StartServer(), StartServer()};
  std::vector<std::string> addresses;
  for (const TestServer& t : servers) {
    ASSERT_NE(t.client, nullptr);
    addresses.push_back(absl::StrCat("127.0.0.1:", t.server->port()));
  }
  absl::StatusOr<std::unique_ptr<client::Client>> balanced =
      client::Client::Connect({.target = absl::StrCat("ipv4:", absl::StrJoin(addresses, ",")),
                               .load_balancing_policy = "round_robin",
                               .health_check_service = "topk.v1.TopK"});
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  client::Client& client = **balanced;
  ASSERT_TRUE(client.WaitForServing(absl::Seconds(20)).ok());

  const tools::PackedRows rows = Rows(Distribution::kIndexer, 8, 3000);
  // Sends `calls` Selects one after another; counts the exact answers.
  auto send = [&](int calls) {
    int exact = 0;
    for (int i = 0; i < calls; ++i) {
      absl::StatusOr<client::SelectResult> result =
          client.Select(32, rows.view(), {.timeout = absl::Seconds(20)});
      EXPECT_TRUE(result.ok()) << "call " << i << ": " << result.status();
      if (result.ok() && tools::Verify(rows, 32, {}, *result).ok()) ++exact;
    }
    return exact;
  };
  // Every subchannel becomes READY (and SERVING) on its own schedule; send
  // until all three took calls, then a round that must spread evenly.
  constexpr int kCalls = 30;
  EXPECT_EQ(send(kCalls), kCalls);
  std::array<uint64_t, 3> before{};
  for (int i = 0; i < 3; ++i) before[i] = Requests(*servers[i].client);
  EXPECT_EQ(send(kCalls), kCalls);
  uint64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    const uint64_t took = Requests(*servers[i].client) - before[i];
    total += took;
    EXPECT_GE(took, uint64_t{kCalls / 3 - 1}) << "server " << i << " took " << took << " calls";
  }
  EXPECT_EQ(total, uint64_t{kCalls});

  // Server 2 turns lame duck; its listener stays open for the 2 s upload grace,
  // refusing new calls with UNAVAILABLE.
  std::thread drain([&] { servers[2].server->Shutdown(absl::Seconds(3)); });
  absl::StatusOr<bool> serving = false;
  for (int i = 0; i < 200; ++i) {
    serving = servers[2].client->IsServing();
    if (serving.ok() && !*serving) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(serving.ok() && !*serving) << "server 2 did not turn NOT_SERVING";
  // The health watch tells the channel within a round trip; well inside the
  // 2 s during which the draining server still accepts connections.
  absl::SleepFor(absl::Milliseconds(500));
  for (int i = 0; i < 2; ++i) before[i] = Requests(*servers[i].client);
  EXPECT_EQ(send(kCalls), kCalls);
  uint64_t rest = 0;
  for (int i = 0; i < 2; ++i) {
    const uint64_t took = Requests(*servers[i].client) - before[i];
    rest += took;
    EXPECT_GE(took, uint64_t{kCalls / 2 - 1}) << "server " << i << " took " << took << " calls";
  }
  EXPECT_EQ(rest, uint64_t{kCalls}) << "calls still went to the server in its drain";
  drain.join();
}

TEST(RoundRobin, ANameThatIsNotAPolicyIsRefused) {
  absl::StatusOr<std::unique_ptr<client::Client>> client = client::Client::Connect(
      {.target = "127.0.0.1:1", .load_balancing_policy = R"(round_robin"}]})"});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("load_balancing_policy"), std::string::npos)
      << client.status();
}

}  // namespace
}  // namespace topk::server::test
