// A fixed-capacity FIFO of job pointers shared by one device's workers. The
// ring is allocated once at start; push never allocates, and a full queue is
// the caller's signal to answer RESOURCE_EXHAUSTED. A worker coalescing a
// batch also takes matching items from anywhere in the queue.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace topk::server {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : ring_(capacity == 0 ? 1 : capacity) {}

  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // False when full or closed.
  bool TryPush(T item) {
    absl::MutexLock lock(&mu_);
    if (closed_ || size_ == ring_.size()) return false;
    ring_[(head_ + size_) % ring_.size()] = std::move(item);
    ++size_;
    return true;
  }

  // Blocks until an item arrives or the queue is closed and empty.
  std::optional<T> Pop() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &BoundedQueue::ReadyOrClosed));
    if (size_ == 0) return std::nullopt;
    T item = std::move(ring_[head_]);
    head_ = (head_ + 1) % ring_.size();
    --size_;
    return item;
  }

  // Removes and returns the oldest item `match` accepts, waiting up to
  // `timeout` for one to arrive (zero: only what is queued now); nullopt
  // when none came or the queue is closed. The items it passes over keep
  // their order. `match` runs under the queue's lock: keep it cheap.
  template <typename Match>
  std::optional<T> TakeFirstMatching(const Match& match, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    // Conditions may run on other threads (the one unlocking): this one only
    // reads.
    const auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return Find(match) < size_ || closed_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    const size_t found = Find(match);
    if (found == size_) return std::nullopt;
    T item = std::move(ring_[(head_ + found) % ring_.size()]);
    // Close the gap: the items after it move one place towards the head.
    for (size_t i = found; i + 1 < size_; ++i) {
      ring_[(head_ + i) % ring_.size()] = std::move(ring_[(head_ + i + 1) % ring_.size()]);
    }
    --size_;
    return item;
  }

  // Wakes every blocked Pop; remaining items are still handed out.
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return size_;
  }
  size_t capacity() const { return ring_.size(); }
  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  bool ReadyOrClosed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return size_ > 0 || closed_; }

  // The queue position of the oldest item `match` accepts; size_ if none.
  template <typename Match>
  size_t Find(const Match& match) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < size_; ++i) {
      if (match(ring_[(head_ + i) % ring_.size()])) return i;
    }
    return size_;
  }

  mutable absl::Mutex mu_;
  std::vector<T> ring_ ABSL_GUARDED_BY(mu_);
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace topk::server
