// The timing side of topk-bench-gpu: CUDA-event timing of one launch, the
// summary of repeated timings (median and p99), and the read bandwidth the
// floor is computed from. Host code; the bandwidth kernel is in
// bench_timing.cu.
#pragma once

#include <cuda_runtime.h>

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

// Device read bandwidth in bytes/s: 16-byte ld.global.cg over 4 GiB of
// non-zero data, median of 7 after one warm-up.
double MeasureReadBandwidth(cudaStream_t stream, cudaEvent_t ev0, cudaEvent_t ev1);

}  // namespace topk::bench
