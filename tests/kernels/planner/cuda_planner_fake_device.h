// A fake H200 for the CUDA planner's host-side tests (the planner is a pure
// host function of the shape, the device's counts and the config).
#pragma once

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "topk/cuda_selector.h"

namespace topk::testing {

inline CudaDeviceInfo FakeH200() {
  CudaDeviceInfo d;
  d.sm_count = 132;
  d.compute_major = 9;
  d.persistent_ctas_per_sm = 2;
  d.small_block_ctas_per_sm = 4;
  d.l2_bytes = 60u << 20;
  d.global_mem_bytes = 141ull << 30;
  return d;
}

// The planner's rules alone (its measured table off): what the rules' tests
// pin down; cuda_planner_table_test.cc tests the table over them.
inline CudaSelectorConfig Rules() {
  CudaSelectorConfig c;
  c.use_route_table = false;
  return c;
}

inline Plan MustPlan(int32_t k, int64_t m, int64_t n, CudaSelectorConfig config = Rules()) {
  auto p = PlanCudaSelection(ProblemShape{k, m, n, Layout::kPitched}, {}, FakeH200(), config);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Plan{};
}

// An H200 with thread-block clusters (the occupancy API's counts, fixed here).
inline CudaDeviceInfo FakeH200WithClusters() {
  CudaDeviceInfo d = FakeH200();
  d.clusters_of_8 = 14;
  d.clusters_of_16 = 7;
  d.dense_clusters_of_8 = 28;
  d.dense_clusters_of_16 = 14;
  return d;
}

inline absl::StatusOr<Plan> ClusterPlan(int32_t k, int64_t m, int64_t n,
                                        CudaSelectorConfig c = Rules()) {
  return PlanCudaSelection(ProblemShape{k, m, n, Layout::kPitched}, {}, FakeH200WithClusters(), c);
}

}  // namespace topk::testing
