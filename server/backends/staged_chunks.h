// Chunks staged in any order by several threads, handed on in index order:
// whichever thread finishes a chunk while no other is handing on becomes the
// one that does, and passes every chunk staged contiguously past the last
// one handed on as one range. The CUDA backend's staging uses it so that its
// uploads go onto the worker's stream from one thread at a time, in order, as
// few large copies, instead of one driver call per chunk from every copying
// thread at once onto the same stream.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace topk::server {

class StagedChunks {
 public:
  // Room for rounds of up to `capacity` chunks.
  explicit StagedChunks(size_t capacity)
      : capacity_(capacity), staged_(std::make_unique<std::atomic<uint8_t>[]>(capacity)) {}

  size_t capacity() const { return capacity_; }

  // Starts a round of `n` <= capacity() chunks, none staged. Not concurrent
  // with Staged.
  void Reset(size_t n) {
    n_ = n;
    next_ = 0;
    for (size_t i = 0; i < n; ++i) staged_[i].store(0, std::memory_order_relaxed);
    pending_.store(0, std::memory_order_relaxed);
  }

  // Chunk `i` is staged. Calls hand_on(begin, end) for ranges of chunks in
  // index order, each chunk exactly once over the round, never two calls at
  // once; the call may come on this thread or on whichever thread is handing
  // on now. When every chunk of the round is Staged and every Staged call
  // has returned, every chunk has been handed on.
  template <typename HandOn>
  void Staged(size_t i, HandOn&& hand_on) {
    staged_[i].store(1, std::memory_order_release);
    // Nonzero before: a thread is handing on and will see this chunk (its
    // count covers this increment before it can stop).
    if (pending_.fetch_add(1, std::memory_order_acq_rel) != 0) return;
    int64_t seen = 1;
    while (true) {
      size_t end = next_;
      while (end < n_ && staged_[end].load(std::memory_order_acquire) != 0) ++end;
      if (end > next_) {
        hand_on(next_, end);
        next_ = end;
      }
      const int64_t left = pending_.fetch_sub(seen, std::memory_order_acq_rel) - seen;
      if (left == 0) return;
      seen = left;
    }
  }

  // Chunks handed on so far (read once the round's Staged calls returned).
  size_t handed_on() const { return next_; }

 private:
  size_t capacity_;
  std::unique_ptr<std::atomic<uint8_t>[]> staged_;
  size_t n_ = 0;
  size_t next_ = 0;  // first chunk not handed on; only the handing-on thread touches it
  std::atomic<int64_t> pending_{0};  // Staged calls not yet seen by a handing-on thread
};

}  // namespace topk::server
