// How many requests each backend call served, counted per device without a
// lock (workers record, the metrics read). 1 everywhere when coalescing is
// off.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace topk::server {

// Bucket upper bounds, in requests per call; one more bucket holds the rest.
inline constexpr std::array<int64_t, 11> kBatchSizeBounds = {1,  2,   4,   8,   16,  32,
                                                             64, 128, 256, 512, 1024};

// A sample of the counts (buckets not cumulative).
struct BatchSizeCounts {
  std::array<int64_t, kBatchSizeBounds.size() + 1> buckets{};
  int64_t calls = 0;     // backend calls
  int64_t requests = 0;  // requests those calls served
  int64_t max = 0;       // the largest call

  BatchSizeCounts& operator+=(const BatchSizeCounts& other) {
    for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += other.buckets[i];
    calls += other.calls;
    requests += other.requests;
    if (other.max > max) max = other.max;
    return *this;
  }
};

class BatchSizes {
 public:
  void Record(int64_t requests) {
    size_t bucket = 0;
    while (bucket < kBatchSizeBounds.size() && requests > kBatchSizeBounds[bucket]) ++bucket;
    buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
    requests_.fetch_add(requests, std::memory_order_relaxed);
    int64_t seen = max_.load(std::memory_order_relaxed);
    while (requests > seen && !max_.compare_exchange_weak(seen, requests)) {
    }
  }

  BatchSizeCounts Sample() const {
    BatchSizeCounts counts;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      counts.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    }
    counts.calls = calls_.load(std::memory_order_relaxed);
    counts.requests = requests_.load(std::memory_order_relaxed);
    counts.max = max_.load(std::memory_order_relaxed);
    return counts;
  }

 private:
  std::array<std::atomic<int64_t>, kBatchSizeBounds.size() + 1> buckets_{};
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> max_{0};
};

}  // namespace topk::server
