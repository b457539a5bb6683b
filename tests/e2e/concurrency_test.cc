// 32 concurrent clients x 200 requests of mixed shapes, options and
// distributions, every answer exact.
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

struct Shape {
  tools::PackedRows rows;
  int32_t k;
  client::CallOptions options;
};

std::vector<Shape> MixedShapes() {
  const Distribution distributions[] = {Distribution::kIndexer, Distribution::kBf16Ties,
                                        Distribution::kUniform, Distribution::kInfMix,
                                        Distribution::kConstant};
  const LengthPattern patterns[] = {LengthPattern::kRandom, LengthPattern::kEdges,
                                    LengthPattern::kCausalTerminal, LengthPattern::kFull};
  const int32_t ks[] = {1, 7, 64, 256};
  std::mt19937 rng(7);
  std::vector<Shape> shapes;
  for (int i = 0; i < 48; ++i) {
    const int32_t k = ks[i % 4];
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 8);
    const int64_t width = 1 + static_cast<int64_t>(rng() % 3000);
    shapes.push_back(
        {.rows = Rows(distributions[i % 5], rows, width, patterns[(i / 5) % 4], i + 1, k),
         .k = k,
         .options = {.sorted = (i % 3) == 0, .deterministic = (i % 7) < 3}});
  }
  return shapes;
}

TEST(ServerConcurrency, ThirtyTwoClientsTwoHundredRequestsEachAllExact) {
  ServerOptions options = SmallOptions();
  TestServer t = StartServer(options);
  ASSERT_NE(t.client, nullptr);
  const std::vector<Shape> shapes = MixedShapes();
  constexpr int kClients = 32;
  constexpr int kRequests = 200;
  std::atomic<int> exact{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = t.NewClient();
      std::mt19937 rng(c);
      for (int i = 0; i < kRequests; ++i) {
        const Shape& shape = shapes[rng() % shapes.size()];
        absl::StatusOr<client::SelectResult> result =
            client->Select(shape.k, shape.rows.view(), shape.options);
        const bool ok = result.ok() && tools::Verify(shape.rows, shape.k,
                                                     {.sorted = shape.options.sorted,
                                                      .deterministic = shape.options.deterministic},
                                                     *result)
                                           .ok();
        if (ok) {
          ++exact;
        } else if (failed++ < 5) {
          ADD_FAILURE() << "client " << c << " request " << i << ": "
                        << (result.ok() ? "inexact" : result.status().ToString());
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(exact.load(), kClients * kRequests);
  absl::StatusOr<v1::Stats> stats = t.client->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->requests(), static_cast<uint64_t>(kClients * kRequests));
  EXPECT_TRUE(stats->errors().empty());
}

}  // namespace
}  // namespace topk::server::test
