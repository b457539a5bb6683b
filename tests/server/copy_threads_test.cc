// CopyThreads, the CUDA backend's staging helpers: every index runs exactly
// once per Run, over many Runs back to back (a helper late for one Run must
// never run a stale loop), with and without helpers.
#include "server/backends/copy_threads.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace topk::server {
namespace {

void ExpectEachIndexOnce(CopyThreads& threads, int64_t n) {
  std::vector<std::atomic<int>> runs(n);
  std::atomic<int64_t> sum{0};
  threads.Run(n, [&](int64_t i) {
    runs[i].fetch_add(1);
    sum.fetch_add(i);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "index " << i << " of " << n;
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
}

TEST(CopyThreads, EveryIndexOncePerRunOverManyRuns) {
  std::atomic<int> started{0};
  CopyThreads threads(3, [&] { started.fetch_add(1); });
  EXPECT_EQ(threads.helpers(), 3);
  for (int run = 0; run < 500; ++run) ExpectEachIndexOnce(threads, 1 + run % 37);
  ExpectEachIndexOnce(threads, 0);
  ExpectEachIndexOnce(threads, 10000);
  // Every helper ran its start hook (it checks in for every Run, so after
  // a Run with helpers they have all started).
  EXPECT_EQ(started.load(), 3);
}

TEST(CopyThreads, TheCallerWorksToo) {
  CopyThreads threads(2);
  std::vector<std::thread::id> by(4000);
  threads.Run(static_cast<int64_t>(by.size()), [&](int64_t i) {
    by[i] = std::this_thread::get_id();
    std::this_thread::yield();
  });
  int caller = 0;
  for (const std::thread::id& id : by) caller += id == std::this_thread::get_id();
  EXPECT_GT(caller, 0);
  ExpectEachIndexOnce(threads, 100);
}

TEST(CopyThreads, WithoutHelpersRunsOnTheCaller) {
  CopyThreads threads(0);
  EXPECT_EQ(threads.helpers(), 0);
  std::vector<std::thread::id> by(50);
  threads.Run(50, [&](int64_t i) { by[i] = std::this_thread::get_id(); });
  for (const std::thread::id& id : by) EXPECT_EQ(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace topk::server
