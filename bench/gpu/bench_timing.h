// The timing side of topk-bench-gpu (and its two check macros): CUDA-event
// timing of one launch and of back-to-back launches, the summary of repeated
// timings (median and p99), and the read bandwidth the floor is computed
// from. Host code; the bandwidth kernel is in bench_timing.cu.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(expr)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (expr);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

#define CHECK_OK(expr)                                                                \
  do {                                                                                \
    auto s_ = (expr);                                                                 \
    if (!s_.ok()) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.ToString().c_str()); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace topk::bench {

// Median and 99th percentile of repeated timings, in ms. The p99 is the
// nearest-rank one: with fewer than 100 repetitions it is the slowest.
struct Timing {
  double median = 0;
  double p99 = 0;
};
Timing Summarize(std::vector<float> ms);

// Milliseconds between two events recorded around launch() on `stream`
// (waits for the second).
template <typename Launch>
float TimeOnce(cudaStream_t stream, cudaEvent_t ev0, cudaEvent_t ev1, Launch&& launch) {
  CHECK_CUDA(cudaEventRecord(ev0, stream));
  launch();
  CHECK_CUDA(cudaEventRecord(ev1, stream));
  CHECK_CUDA(cudaEventSynchronize(ev1));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, ev0, ev1));
  return ms;
}

// Times `reps` launches after `warmup` untimed ones.
template <typename Launch>
Timing TimeRepeated(cudaStream_t stream, cudaEvent_t ev0, cudaEvent_t ev1, int warmup, int reps,
                    Launch&& launch) {
  std::vector<float> times;
  for (int it = 0; it < warmup + reps; ++it) {
    const float ms = TimeOnce(stream, ev0, ev1, [&] { launch(it); });
    if (it >= warmup) times.push_back(ms);
  }
  return Summarize(std::move(times));
}

// `calls` launches issued back to back with no host wait (issue(i) for call
// i): the host's issue time and the device time per call, in us.
struct LoopTiming {
  double host_us = 0;
  double device_us = 0;
};
template <typename Issue>
LoopTiming TimeBackToBack(cudaStream_t stream, cudaEvent_t ev0, cudaEvent_t ev1, int calls,
                          Issue&& issue) {
  CHECK_CUDA(cudaEventRecord(ev0, stream));
  const auto h0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) issue(i);
  const auto h1 = std::chrono::steady_clock::now();
  CHECK_CUDA(cudaEventRecord(ev1, stream));
  CHECK_CUDA(cudaEventSynchronize(ev1));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, ev0, ev1));
  LoopTiming t;
  t.host_us = std::chrono::duration<double, std::micro>(h1 - h0).count() / calls;
  t.device_us = ms * 1e3 / calls;
  return t;
}

// Device read bandwidth in bytes/s: 16-byte ld.global.cg over 4 GiB of
// non-zero data, median of 7 after one warm-up.
double MeasureReadBandwidth(cudaStream_t stream, cudaEvent_t ev0, cudaEvent_t ev1);

}  // namespace topk::bench
