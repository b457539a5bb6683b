// A fixed-capacity FIFO of job pointers shared by one device's workers. The
// ring is allocated once at start; push never allocates, and a full queue is
// the caller's signal to answer RESOURCE_EXHAUSTED.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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

  mutable absl::Mutex mu_;
  std::vector<T> ring_ ABSL_GUARDED_BY(mu_);
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace topk::server
