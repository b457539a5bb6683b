// A bounded soak on loopback: several clients hold a mix of valid and invalid
// load (unary and streamed, every option, bad K, NaN, short payloads, too
// many rows, corrupt chunks, garbage bodies, client deadlines) for
// TOPK_SOAK_SECONDS (default 90) on a server in a child process. Asserts: 0
// wrong answers (every OK is verified exactly), only the status codes each
// kind of call may get, the server's counters agree with what the clients
// saw, the server's resident set stops growing and is back within a bound of
// its base once the load stops, and the server exits cleanly.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/process_tuning.h"
#include "support/raw_calls.h"
#include "support/server_process.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

// Growth allowed after the load: allocator arenas of the client and gRPC
// threads fragment a little; a leak of the request path (tens of MB a
// minute at these rates) does not fit.
constexpr int64_t kRssBoundKb = 64 * 1024;
// Growth allowed between the second and the third part of the load.
constexpr int64_t kRssGrowthKb = 16 * 1024;

absl::Duration SoakDuration() {
  const char* text = std::getenv("TOPK_SOAK_SECONDS");
  return absl::Seconds(text != nullptr && *text != '\0' ? std::atof(text) : 90.0);
}

// What the clients saw, by kind of call.
struct Tally {
  absl::Mutex mu;
  int64_t calls = 0, exact = 0, wrong = 0, unexpected = 0, select_calls = 0;
  std::map<std::string, int64_t> by_outcome;  // "kind: CODE"

  void Add(const std::string& kind, absl::StatusCode code, bool allowed, bool is_select) {
    absl::MutexLock lock(&mu);
    ++calls;
    select_calls += is_select ? 1 : 0;
    ++by_outcome[kind + ": " + absl::StatusCodeToString(code)];
    if (!allowed) {
      ++unexpected;
      ADD_FAILURE() << kind << " got " << absl::StatusCodeToString(code);
    }
  }
};

class SoakClient {
 public:
  SoakClient(const std::string& address, int seed, Tally& tally)
      : random_(seed), tally_(tally), client_(Connect(address)) {}

  void OneCall() {
    const int kind = std::uniform_int_distribution<int>(0, 11)(random_);
    const uint64_t seed = random_();
    switch (kind) {
      case 0:
      case 1:
      case 2:
      case 3:
        return ValidUnary(seed);
      case 4:
      case 5:
        return ValidStream(seed);
      case 6:
        return BadK(seed);
      case 7:
        return NanRow(seed);
      case 8:
        return ShortPayload(seed);
      case 9:
        return CorruptChunk(seed);
      case 10:
        return GarbageBody();
      default:
        return TightDeadline(seed);
    }
  }

 private:
  tools::PackedRows Batch(uint64_t seed, int64_t max_rows, int64_t max_width) {
    std::mt19937_64 r(seed);
    constexpr int kDistributions = std::size(testing::kAllDistributions);
    const LengthPattern patterns[] = {LengthPattern::kRandom, LengthPattern::kFull,
                                      LengthPattern::kEdges, LengthPattern::kCausalTerminal};
    return Rows(testing::kAllDistributions[r() % kDistributions],
                1 + static_cast<int64_t>(r() % max_rows),
                64 + static_cast<int64_t>(r() % max_width), patterns[r() % 4], seed,
                static_cast<int32_t>(1 + r() % 300));
  }

  client::CallOptions Options(uint64_t seed) {
    return {.sorted = (seed & 1) != 0,
            .deterministic = (seed & 2) != 0,
            .return_values = (seed & 4) != 0,
            .request_id = "soak-" + std::to_string(seed % 1000)};
  }

  void Check(const std::string& kind, const tools::PackedRows& rows, int32_t k,
             const client::CallOptions& options,
             const absl::StatusOr<client::SelectResult>& result) {
    if (result.ok()) {
      const bool exact =
          tools::Verify(rows, k, {.sorted = options.sorted, .deterministic = options.deterministic},
                        *result)
              .ok();
      absl::MutexLock lock(&tally_.mu);
      ++(exact ? tally_.exact : tally_.wrong);
      if (!exact) ADD_FAILURE() << kind << ": an answer that is not exact";
    }
    // RESOURCE_EXHAUSTED: the queue or the memory budget, under load.
    const absl::StatusCode code = result.status().code();
    tally_.Add(kind, code,
               code == absl::StatusCode::kOk || code == absl::StatusCode::kResourceExhausted, true);
  }

  void ValidUnary(uint64_t seed) {
    const tools::PackedRows rows = Batch(seed, 32, 20000);
    const int32_t k = static_cast<int32_t>(1 + seed % 400);
    const client::CallOptions options = Options(seed);
    Check("unary", rows, k, options, client_->Select(k, rows.view(), options));
  }

  void ValidStream(uint64_t seed) {
    const tools::PackedRows rows = Batch(seed, 16, 20000);
    const int32_t k = static_cast<int32_t>(1 + seed % 400);
    const client::CallOptions options = Options(seed);
    Check("stream", rows, k, options,
          client_->SelectStreaming(k, rows.view(), options, 1000 + seed % 50000));
  }

  void ExpectInvalid(const std::string& kind, absl::StatusCode code) {
    tally_.Add(kind, code, code == absl::StatusCode::kInvalidArgument, true);
  }

  void BadK(uint64_t seed) {
    const tools::PackedRows rows = Batch(seed, 8, 2000);
    ExpectInvalid("k out of range",
                  client_->Select((seed & 1) ? 0 : 513, rows.view()).status().code());
  }

  void NanRow(uint64_t seed) {
    tools::PackedRows rows = Batch(seed, 8, 2000);
    int64_t row = 0;
    while (row < static_cast<int64_t>(rows.lengths.size()) && rows.lengths[row] == 0) ++row;
    if (row == static_cast<int64_t>(rows.lengths.size())) return;
    rows.scores[rows.offsets[row]] = std::numeric_limits<float>::quiet_NaN();
    ExpectInvalid("NaN", client_->Select(8, rows.view()).status().code());
  }

  void ShortPayload(uint64_t seed) {
    const tools::PackedRows rows = Batch(seed, 8, 2000);
    v1::SelectRequest request = client::Client::MakeRequest(8, rows.view(), {});
    request.mutable_inline_rows()->add_lengths(5);  // 5 floats the payload lacks
    ExpectInvalid("short payload", client_->Select(request).status().code());
  }

  void CorruptChunk(uint64_t seed) {
    v1::SelectChunk first;
    first.set_k(4);
    first.add_lengths(10);
    first.set_scores(std::string(40, '\x02'));
    const RawReply reply =
        RawClientStream(client_->channel(), "/topk.v1.TopK/SelectStream",
                        {first.SerializeAsString(), (seed & 1) ? "\xff\xff\xff" : "\x2a\x01\xff"});
    ExpectInvalid("corrupt chunk", static_cast<absl::StatusCode>(reply.status.error_code()));
  }

  void GarbageBody() {
    const RawReply reply = RawUnary(client_->channel(), "/topk.v1.TopK/GetStats", "\xff\xff\xff");
    tally_.Add("garbage GetStats", static_cast<absl::StatusCode>(reply.status.error_code()),
               reply.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT, false);
  }

  void TightDeadline(uint64_t seed) {
    const tools::PackedRows rows = Batch(seed, 48, 60000);
    client::CallOptions options = Options(seed);
    options.timeout = absl::Microseconds(200 + seed % 3000);
    const int32_t k = 16;
    absl::StatusOr<client::SelectResult> result = client_->Select(k, rows.view(), options);
    if (result.ok()) {
      Check("deadline", rows, k, options, result);
      return;
    }
    const absl::StatusCode code = result.status().code();
    tally_.Add(
        "deadline", code,
        code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kResourceExhausted,
        true);
  }

  std::mt19937_64 random_;
  Tally& tally_;
  std::unique_ptr<client::Client> client_;
};

void HoldLoad(const std::string& address, absl::Duration duration, int clients, int seed,
              Tally& tally) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      SoakClient client(address, seed * 100 + c, tally);
      while (!stop.load()) client.OneCall();
    });
  }
  absl::SleepFor(duration);
  stop.store(true);
  for (auto& thread : threads) thread.join();
}

TEST(Soak, MixedValidAndInvalidLoad) {
  ServerOptions options = SmallOptions();
  options.engine.queue_depth = 16;
  ChildServer server(options);
  ASSERT_GT(server.pid(), 0);
  const std::string address = server.address();
  ASSERT_NE(address, "127.0.0.1:0") << "the server did not start";
  std::unique_ptr<client::Client> stats_client = Connect(address);
  ASSERT_NE(stats_client, nullptr);

  // The base is the resident set once the same load reached its working set
  // (worker staging and workspaces at their largest, every thread's
  // allocator arena in use: about 8 s on 2 cores), after the idle release.
  Tally warmup;
  HoldLoad(address, absl::Seconds(15), 4, 1, warmup);
  absl::SleepFor(absl::Seconds(2));
  const int64_t base = ResidentKb(server.pid());

  // The load in three parts, each followed by an idle moment: the resident
  // set after each part shows whether it still grows once the working set is
  // reached (a leak) or only moves within the allocator's noise.
  Tally tally;
  const absl::Duration duration = SoakDuration();
  std::vector<int64_t> after_part;
  int64_t peak = 0;
  for (int part = 0; part < 3; ++part) {
    HoldLoad(address, duration / 3, 4, 2 + part, tally);
    peak = std::max(peak, ResidentKb(server.pid()));
    int64_t now = ResidentKb(server.pid());
    for (int i = 0; i < 30; ++i) {  // the idle release runs 1 s after the load
      absl::SleepFor(absl::Milliseconds(100));
      now = ResidentKb(server.pid());
    }
    after_part.push_back(now);
    std::printf("soak part %d: RSS %lld kB after it\n", part + 1, static_cast<long long>(now));
    std::fflush(stdout);
  }
  const int64_t after = after_part.back();

  absl::MutexLock lock(&tally.mu);
  for (const auto& [outcome, count] : tally.by_outcome) {
    std::printf("  %-40s %lld\n", outcome.c_str(), static_cast<long long>(count));
  }
  std::printf(
      "soak: %s, %lld calls, %lld exact answers, RSS %lld kB base, %lld kB at the end "
      "of the load, %lld kB after\n",
      absl::FormatDuration(duration).c_str(), static_cast<long long>(tally.calls),
      static_cast<long long>(tally.exact), static_cast<long long>(base),
      static_cast<long long>(peak), static_cast<long long>(after));
  EXPECT_EQ(tally.wrong, 0);
  EXPECT_EQ(tally.unexpected, 0);
  EXPECT_GT(tally.exact, 0);
  for (const char* kind :
       {"unary: OK", "stream: OK", "NaN: INVALID_ARGUMENT", "corrupt chunk: INVALID_ARGUMENT",
        "garbage GetStats: INVALID_ARGUMENT"}) {
    EXPECT_GT(tally.by_outcome[kind], 0) << kind << " never happened";
  }
  // The server's counters agree with the clients: every Select call counted
  // once, its error under the code the client saw (streams are counted as
  // gRPC finishes them: allow a moment).
  v1::Stats stats;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<v1::Stats> now = stats_client->GetStats();
    ASSERT_TRUE(now.ok()) << now.status();
    stats = *now;
    uint64_t errors = 0;
    for (const auto& [code, count] : stats.errors()) errors += count;
    if (stats.requests() == errors + stats.total_latency().count()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  uint64_t errors = 0;
  for (const auto& [code, count] : stats.errors()) errors += count;
  EXPECT_EQ(stats.requests(), errors + stats.total_latency().count()) << stats.DebugString();
  EXPECT_EQ(stats.errors().count("INTERNAL"), 0u) << stats.DebugString();
  EXPECT_EQ(stats.errors().count("UNKNOWN"), 0u) << stats.DebugString();
  EXPECT_LT(after - base, kRssBoundKb)
      << "RSS " << base << " kB before the soak, " << after << " kB after it";
  EXPECT_EQ(server.Stop(), 0) << "the server did not exit cleanly";
  RecordProperty("calls", std::to_string(tally.calls));
  RecordProperty("rss_base_kb", std::to_string(base));
  RecordProperty("rss_after_kb", std::to_string(after));
}

}  // namespace
}  // namespace topk::server::test
