// Every input error of the issue gets INVALID_ARGUMENT naming the field and
// the row; queue overflow gets RESOURCE_EXHAUSTED; a device error gets a
// sticky UNAVAILABLE; and none of it disturbs other requests.
#include <functional>
#include <limits>
#include <thread>

#include "absl/strings/match.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/backends/cpu_backend.h"
#include "support/test_server.h"

namespace topk::server::test {
namespace {

using testing::Distribution;

absl::Status Call(TestServer& t, const v1::SelectRequest& request) {
  return t.client->Select(request).status();
}

v1::SelectRequest Request(const tools::PackedRows& rows, int32_t k) {
  return client::Client::MakeRequest(k, rows.view(), {});
}

void ExpectInvalid(const absl::Status& status, std::initializer_list<const char*> words) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const char* word : words) {
    EXPECT_TRUE(absl::StrContains(status.message(), word))
        << "'" << word << "' missing from: " << status.message();
  }
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    t_ = StartServer();
    ASSERT_NE(t_.client, nullptr);
  }
  TestServer t_;
  tools::PackedRows rows_ = Rows(Distribution::kIndexer, 5, 1000);
};

TEST_F(BadInput, KBelowOne) { ExpectInvalid(Call(t_, Request(rows_, 0)), {"k = 0", "[1, 512]"}); }

TEST_F(BadInput, KAboveMaxK) { ExpectInvalid(Call(t_, Request(rows_, 513)), {"k = 513", "max_k"}); }

TEST_F(BadInput, ByteCountDoesNotMatchLengths) {
  v1::SelectRequest request = Request(rows_, 8);
  request.mutable_inline_rows()->mutable_scores()->resize(request.inline_rows().scores().size() -
                                                          3);
  ExpectInvalid(Call(t_, request), {"scores", "4 * sum(lengths)"});
}

TEST_F(BadInput, NegativeLength) {
  v1::SelectRequest request = Request(rows_, 8);
  request.mutable_inline_rows()->set_lengths(2, -1);
  ExpectInvalid(Call(t_, request), {"lengths[2] = -1", "negative", "row 2"});
}

TEST_F(BadInput, LengthOverMaxWidth) {
  v1::SelectRequest request = Request(rows_, 8);
  request.mutable_inline_rows()->set_lengths(4, (1 << 16) + 1);
  ExpectInvalid(Call(t_, request), {"lengths[4]", "max_width", "row 4"});
}

TEST_F(BadInput, MoreRowsThanMaxRows) {
  const tools::PackedRows many = Rows(Distribution::kIndexer, 65, 10);
  ExpectInvalid(Call(t_, Request(many, 4)), {"lengths", "65 rows", "max_rows"});
}

TEST_F(BadInput, NanInAValidPrefixNamesTheRow) {
  tools::PackedRows rows = Rows(Distribution::kIndexer, 6, 2000, testing::LengthPattern::kFull);
  rows.scores[rows.offsets[3] + 1234] = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(t_.client->Select(16, rows.view()).status(), {"row 3", "NaN"});
  // NaN beyond a valid prefix is not part of the batch: nothing to reject.
}

TEST_F(BadInput, EmptyBatch) {
  const tools::PackedRows empty = tools::FromLengths({}, {});
  ExpectInvalid(t_.client->Select(4, empty.view()).status(), {"lengths", "empty"});
}

TEST_F(BadInput, NoRowsAtAll) {
  v1::SelectRequest request;
  request.set_k(4);
  ExpectInvalid(Call(t_, request), {"rows", "inline_rows"});
}

TEST_F(BadInput, StreamingChecksTheSameRules) {
  tools::PackedRows rows = Rows(Distribution::kIndexer, 4, 5000, testing::LengthPattern::kFull);
  rows.scores[rows.offsets[2] + 7] = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(t_.client->SelectStreaming(16, rows.view(), {}, 4096).status(), {"row 2", "NaN"});
  ExpectInvalid(t_.client->SelectStreaming(0, rows_.view(), {}, 4096).status(), {"k = 0"});
  const tools::PackedRows many = Rows(Distribution::kIndexer, 100, 10);
  ExpectInvalid(t_.client->SelectStreaming(4, many.view(), {}, 64).status(), {"max_rows"});
}

TEST_F(BadInput, BadRequestsDoNotDisturbGoodOnes) {
  tools::PackedRows nan_rows = Rows(Distribution::kIndexer, 4, 3000);
  nan_rows.scores[5] = std::numeric_limits<float>::quiet_NaN();
  const tools::PackedRows good = Rows(Distribution::kBf16Ties, 8, 3000);
  std::vector<std::thread> threads;
  std::atomic<int> good_ok{0}, bad_rejected{0};
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      auto client = t_.NewClient();
      for (int i = 0; i < 40; ++i) {
        if ((i + c) % 2 == 0) {
          absl::StatusOr<client::SelectResult> r = client->Select(100, good.view());
          if (r.ok() && tools::Verify(good, 100, {}, *r).ok()) ++good_ok;
        } else {
          const int32_t k = (i % 4 == 1) ? 0 : 100;
          const absl::Status s = client->Select(k, nan_rows.view()).status();
          if (s.code() == absl::StatusCode::kInvalidArgument) ++bad_rejected;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(good_ok.load(), 160);
  EXPECT_EQ(bad_rejected.load(), 160);
}

// A CPU device whose selections go through `select` first: injects
// failures and delays the way a broken or busy GPU would.
using SelectHook = std::function<absl::Status(
    WorkerBackend& inner, const Plan& plan, const SelectRows& rows, const SelectResults& results)>;

class FakeDevice final : public Device {
 public:
  explicit FakeDevice(SelectHook hook) : hook_(std::move(hook)) {}
  std::string backend_name() const override { return "fake"; }
  DeviceDescription description() const override { return {.ordinal = 0, .name = "fake"}; }
  absl::StatusOr<std::unique_ptr<WorkerBackend>> CreateWorker(
      const RequestLimits& limits) override {
    class Worker final : public WorkerBackend {
     public:
      Worker(std::unique_ptr<WorkerBackend> inner, SelectHook hook)
          : inner_(std::move(inner)), hook_(std::move(hook)) {}
      absl::StatusOr<Plan> MakePlan(const ProblemShape& shape,
                                    const SelectOptions& options) const override {
        return inner_->MakePlan(shape, options);
      }
      absl::Status Select(const Plan& plan, const SelectRows& rows,
                          const SelectResults& results) override {
        return hook_(*inner_, plan, rows, results);
      }

     private:
      std::unique_ptr<WorkerBackend> inner_;
      SelectHook hook_;
    };
    absl::StatusOr<std::unique_ptr<WorkerBackend>> inner =
        MakeCpuDevice(1, 1)->CreateWorker(limits);
    if (!inner.ok()) return inner.status();
    return std::make_unique<Worker>(*std::move(inner), hook_);
  }

 private:
  SelectHook hook_;
};

TEST(QueueLimit, FullQueueAnswersResourceExhausted) {
  // One worker that takes 300 ms per request and one queue slot: of many
  // requests sent at once, one runs, one waits, the rest must be refused.
  ServerOptions options = SmallOptions();
  options.backends.workers = 1;
  options.engine.queue_depth = 1;
  options.backends.device_factory = [] {
    return std::make_unique<FakeDevice>([](WorkerBackend& inner, const Plan& plan,
                                           const SelectRows& rows, const SelectResults& results) {
      absl::SleepFor(absl::Milliseconds(300));
      return inner.Select(plan, rows, results);
    });
  };
  TestServer t = StartServer(options);
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 4, 2000);
  auto request =
      std::make_shared<const v1::SelectRequest>(client::Client::MakeRequest(512, rows.view(), {}));
  constexpr int kCalls = 24;
  absl::Mutex mu;
  int done = 0, exact = 0, exhausted = 0, other = 0;
  for (int i = 0; i < kCalls; ++i) {
    t.client->SelectAsync(request, {}, [&](absl::StatusOr<client::SelectResult> result) {
      const bool ok = result.ok() && tools::Verify(rows, 512, {}, *result).ok();
      absl::MutexLock lock(&mu);
      ++done;
      if (ok) {
        ++exact;
      } else if (result.status().code() == absl::StatusCode::kResourceExhausted) {
        ++exhausted;
        EXPECT_TRUE(absl::StrContains(result.status().message(), "queue is full"));
      } else {
        ++other;
      }
    });
  }
  absl::MutexLock lock(&mu);
  mu.AwaitWithTimeout(absl::Condition(
                          +[](int* d) { return *d == kCalls; }, &done),
                      absl::Seconds(120));
  EXPECT_EQ(done, kCalls);
  EXPECT_GE(exact, 1);
  EXPECT_GE(exhausted, 1);
  EXPECT_EQ(other, 0);
}

TEST(DeviceError, IsStickyUnavailableAndFlipsHealth) {
  ServerOptions options = SmallOptions();
  options.backends.workers = 1;
  options.backends.device_factory = [] {
    return std::make_unique<FakeDevice>(
        [](WorkerBackend&, const Plan&, const SelectRows&, const SelectResults&) {
          return absl::UnavailableError("injected: cudaErrorIllegalAddress");
        });
  };
  TestServer t = StartServer(options);
  EXPECT_TRUE(*t.client->IsServing());
  const tools::PackedRows rows = Rows(Distribution::kIndexer, 2, 100);
  const absl::Status first = t.client->Select(8, rows.view()).status();
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable) << first;
  EXPECT_TRUE(absl::StrContains(first.message(), "injected"));
  const absl::Status second = t.client->Select(8, rows.view()).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kUnavailable) << second;
  EXPECT_FALSE(*t.client->IsServing());
  EXPECT_FALSE(*t.client->IsServing(""));
  absl::StatusOr<v1::ServerInfo> info = t.client->GetServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->devices(0).usable());
  // Input errors are still reported as such.
  EXPECT_EQ(t.client->Select(0, rows.view()).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace topk::server::test
