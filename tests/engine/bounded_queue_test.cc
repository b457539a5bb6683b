// BoundedQueue, the per-device request queue: its capacity is the engine's
// backpressure (a full queue is RESOURCE_EXHAUSTED), Close() drains rather
// than drops, and a coalescing worker's out-of-order take keeps the order
// of what it passes over.
#include "server/engine/bounded_queue.h"

#include <optional>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace topk::server::test {
namespace {

TEST(BoundedQueue, RefusesWhenFullAndDrainsAfterClose) {
  BoundedQueue<int> queue(2);
  EXPECT_TRUE(queue.TryPush(1));
  EXPECT_TRUE(queue.TryPush(2));
  EXPECT_FALSE(queue.TryPush(3));
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_EQ(*queue.Pop(), 1);
  EXPECT_TRUE(queue.TryPush(3));
  queue.Close();
  EXPECT_FALSE(queue.TryPush(4));
  EXPECT_EQ(*queue.Pop(), 2);
  EXPECT_EQ(*queue.Pop(), 3);
  EXPECT_FALSE(queue.Pop().has_value());
}

// A capacity of 0 would make every push fail (and the ring's modulo divide
// by zero): it holds one item instead.
TEST(BoundedQueue, ZeroCapacityHoldsOne) {
  BoundedQueue<int> queue(0);
  EXPECT_EQ(queue.capacity(), 1u);
  EXPECT_TRUE(queue.TryPush(7));
  EXPECT_FALSE(queue.TryPush(8));
}

// The ring wraps: capacity-many items in and out, many times over, in order.
TEST(BoundedQueue, StaysFifoAcrossTheRingsWrap) {
  BoundedQueue<int> queue(3);
  int next_in = 0;
  int next_out = 0;
  for (int round = 0; round < 10; ++round) {
    while (queue.TryPush(next_in)) ++next_in;
    EXPECT_EQ(queue.size(), 3u);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(*queue.Pop(), next_out++);
  }
}

TEST(BoundedQueue, TakeFirstMatchingKeepsTheOrderOfWhatItPassesOver) {
  BoundedQueue<int> queue(8);
  for (int i : {1, 2, 3, 4, 5, 6}) ASSERT_TRUE(queue.TryPush(i));
  const auto even = [](int v) { return v % 2 == 0; };
  EXPECT_EQ(queue.TakeFirstMatching(even, absl::ZeroDuration()), 2);
  EXPECT_EQ(queue.TakeFirstMatching(even, absl::ZeroDuration()), 4);
  EXPECT_EQ(queue.size(), 4u);
  for (int expected : {1, 3, 5, 6}) EXPECT_EQ(*queue.Pop(), expected);
}

TEST(BoundedQueue, TakeFirstMatchingWithZeroTimeoutDoesNotWait) {
  BoundedQueue<int> queue(4);
  ASSERT_TRUE(queue.TryPush(1));
  const absl::Time start = absl::Now();
  EXPECT_EQ(queue.TakeFirstMatching([](int v) { return v > 1; }, absl::ZeroDuration()),
            std::nullopt);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_EQ(queue.size(), 1u);  // the non-matching item stays
}

TEST(BoundedQueue, TakeFirstMatchingWaitsForAMatchThatArrives) {
  BoundedQueue<int> queue(4);
  std::thread pusher([&] {
    absl::SleepFor(absl::Milliseconds(5));
    queue.TryPush(42);
  });
  EXPECT_EQ(queue.TakeFirstMatching([](int v) { return v == 42; }, absl::Seconds(10)), 42);
  pusher.join();
}

// Stop() closes the queues while workers block in Pop: they must wake.
TEST(BoundedQueue, CloseWakesABlockedPop) {
  BoundedQueue<int> queue(4);
  std::optional<int> popped = 0;
  std::thread waiter([&] { popped = queue.Pop(); });
  absl::SleepFor(absl::Milliseconds(5));
  queue.Close();
  waiter.join();
  EXPECT_FALSE(popped.has_value());
  EXPECT_TRUE(queue.closed());
}

// What was queued before Close is still handed out, to a coalescing take too.
TEST(BoundedQueue, ClosedQueueStillHandsOutMatchingItems) {
  BoundedQueue<int> queue(4);
  ASSERT_TRUE(queue.TryPush(1));
  ASSERT_TRUE(queue.TryPush(2));
  queue.Close();
  EXPECT_EQ(queue.TakeFirstMatching([](int v) { return v == 2; }, absl::Seconds(10)), 2);
  EXPECT_EQ(queue.TakeFirstMatching([](int v) { return v == 3; }, absl::Seconds(10)),
            std::nullopt);  // closed: no wait for one to come
  EXPECT_EQ(*queue.Pop(), 1);
}

}  // namespace
}  // namespace topk::server::test
