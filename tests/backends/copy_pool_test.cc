// CopyPool, the CUDA backends' shared staging helpers: every index runs
// exactly once per Run, over many Runs back to back (a helper late for one
// Run must never run a stale loop), with several callers at once, within
// each Run's helper cap, and without helpers.
#include "server/backends/copy_pool.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/backends/staged_chunks.h"

namespace topk::server {
namespace {

void ExpectEachIndexOnce(CopyPool& pool, int64_t n, int max_helpers) {
  std::vector<std::atomic<int>> runs(n);
  std::atomic<int64_t> sum{0};
  pool.Run(n, max_helpers, [&](int64_t i) {
    runs[i].fetch_add(1);
    sum.fetch_add(i);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "index " << i << " of " << n;
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
}

TEST(CopyPool, EveryIndexOncePerRunOverManyRuns) {
  CopyPool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  for (int run = 0; run < 500; ++run) ExpectEachIndexOnce(pool, 1 + run % 37, 3);
  ExpectEachIndexOnce(pool, 0, 3);
  ExpectEachIndexOnce(pool, 10000, 3);
}

TEST(CopyPool, ConcurrentCallersEachGetEveryIndexOnce) {
  CopyPool pool(4);
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&pool, c] {
      for (int run = 0; run < 200; ++run) ExpectEachIndexOnce(pool, 1 + (run * 7 + c) % 53, 2 + c);
    });
  }
  for (std::thread& t : callers) t.join();
}

TEST(CopyPool, AtMostMaxHelpersBesidesTheCaller) {
  CopyPool pool(6);
  for (int cap : {0, 1, 2, 6, 20}) {
    std::mutex mu;
    std::set<std::thread::id> threads;
    pool.Run(3000, cap, [&](int64_t) {
      {
        std::lock_guard lock(mu);
        threads.insert(std::this_thread::get_id());
      }
      std::this_thread::yield();
    });
    const size_t most = 1 + static_cast<size_t>(std::min(cap, pool.threads()));
    EXPECT_LE(threads.size(), most) << "cap " << cap;
    EXPECT_GE(threads.size(), 1u);
    if (cap == 0) {
      EXPECT_EQ(*threads.begin(), std::this_thread::get_id());
    }
  }
}

TEST(CopyPool, TheCallerWorksToo) {
  CopyPool pool(2);
  std::vector<std::thread::id> by(4000);
  pool.Run(static_cast<int64_t>(by.size()), 2, [&](int64_t i) {
    by[i] = std::this_thread::get_id();
    std::this_thread::yield();
  });
  int caller = 0;
  for (const std::thread::id& id : by) caller += id == std::this_thread::get_id();
  EXPECT_GT(caller, 0);
}

TEST(CopyPool, WithoutThreadsRunsOnTheCaller) {
  CopyPool pool(0);
  EXPECT_EQ(pool.threads(), 0);
  std::vector<std::thread::id> by(50);
  pool.Run(50, 8, [&](int64_t i) { by[i] = std::this_thread::get_id(); });
  for (const std::thread::id& id : by) EXPECT_EQ(id, std::this_thread::get_id());
}

TEST(CopyPool, DefaultThreadsAreHalfTheCoresAtMostSixteen) {
  EXPECT_EQ(CopyPool::DefaultThreads(1), 0);
  EXPECT_EQ(CopyPool::DefaultThreads(2), 1);
  EXPECT_EQ(CopyPool::DefaultThreads(16), 8);
  EXPECT_EQ(CopyPool::DefaultThreads(32), 16);
  EXPECT_EQ(CopyPool::DefaultThreads(128), 16);
}

// StagedChunks over the pool, as the CUDA staging uses it: every chunk
// handed on exactly once, in index order, in ranges that never overlap or
// run concurrently, over many rounds of one object, whatever order the
// threads stage in.
TEST(StagedChunks, EveryChunkHandedOnOnceInOrderByOneThreadAtATime) {
  CopyPool pool(3);
  StagedChunks staged(257);
  EXPECT_EQ(staged.capacity(), 257u);
  for (int round = 0; round < 400; ++round) {
    const size_t n = 1 + (round * 37) % 257;
    staged.Reset(n);
    std::vector<std::pair<size_t, size_t>> ranges;  // appended by the handing-on thread only
    std::atomic<int> inside{0};
    std::atomic<bool> overlapped{false};
    pool.Run(static_cast<int64_t>(n), 3, [&](int64_t i) {
      staged.Staged(static_cast<size_t>(i), [&](size_t begin, size_t end) {
        if (inside.fetch_add(1) != 0) overlapped = true;
        ranges.emplace_back(begin, end);
        inside.fetch_sub(1);
      });
    });
    ASSERT_FALSE(overlapped.load()) << "round " << round;
    ASSERT_EQ(staged.handed_on(), n) << "round " << round;
    size_t expect = 0;
    for (const auto& [begin, end] : ranges) {
      ASSERT_EQ(begin, expect) << "round " << round;
      ASSERT_GT(end, begin) << "round " << round;
      expect = end;
    }
    ASSERT_EQ(expect, n) << "round " << round;
  }
}

TEST(StagedChunks, AChunkStagedOutOfOrderWaitsForTheOnesBeforeIt) {
  StagedChunks staged(4);
  staged.Reset(4);
  std::vector<std::pair<size_t, size_t>> ranges;
  const auto record = [&](size_t begin, size_t end) { ranges.emplace_back(begin, end); };
  staged.Staged(2, record);
  staged.Staged(1, record);
  EXPECT_TRUE(ranges.empty());
  EXPECT_EQ(staged.handed_on(), 0u);
  staged.Staged(0, record);
  staged.Staged(3, record);
  EXPECT_EQ(ranges, (std::vector<std::pair<size_t, size_t>>{{0, 3}, {3, 4}}));
  EXPECT_EQ(staged.handed_on(), 4u);
}

}  // namespace
}  // namespace topk::server
