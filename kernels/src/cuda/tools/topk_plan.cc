// topk-plan --explain [--k=K] [--nosampling] [--fake_h200]: prints the
// planner's decision for the operator matrix (docs/design.md section 9). Uses
// the real device when one is present, else an H200 description.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "topk/cuda_selector.h"

ABSL_FLAG(bool, explain, false, "print the planner's route table for the operator matrix");
ABSL_FLAG(int32_t, k, 2048, "the rank K of every planned shape");
ABSL_FLAG(bool, sampling, topk::CudaSelectorConfig{}.enable_sampling,
          "plan the sampled routes (false: the exact route everywhere)");
ABSL_FLAG(bool, fake_h200, false, "plan for an H200 description instead of this device");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("topk-plan --explain [--k=K] [--nosampling] [--fake_h200]");
  absl::ParseCommandLine(argc, argv);
  if (!absl::GetFlag(FLAGS_explain)) {
    std::fprintf(stderr, "%s\n", std::string(absl::ProgramUsageMessage()).c_str());
    return 2;
  }
  const int32_t k = absl::GetFlag(FLAGS_k);
  const bool fake = absl::GetFlag(FLAGS_fake_h200);
  topk::CudaSelectorConfig config;
  config.enable_sampling = absl::GetFlag(FLAGS_sampling);
  topk::CudaDeviceInfo info{132, 9, 0, 60u << 20, 141ull << 30, 2, 4};
  const char* source = "fake H200 (132 SMs, 2 CTAs/SM of 512 threads, 4 of 256)";
  if (!fake) {
    auto selector = topk::CudaSelector::Create(config);
    if (selector.ok()) {
      info = (*selector)->device_info();
      source = "this device";
    }
  }
  std::printf("# device: %s: %d SMs, sm_%d%d, %d persistent CTAs/SM (512 threads), %d (256)\n",
              source, info.sm_count, info.compute_major, info.compute_minor,
              info.persistent_ctas_per_sm, info.small_block_ctas_per_sm);
  std::printf("%-6s %-8s %-8s %-20s %-6s %-5s %-6s %-6s %-12s\n", "K", "M_cap", "N_cap", "route",
              "stride", "split", "grid", "block", "workspace");
  const int64_t rows[] = {1, 8, 64, 512, 1024, 2048, 4096, 8192};
  const int64_t widths[] = {4096, 16384, 65536, 131072, 262144, 524288, 1048576};
  for (int64_t m : rows) {
    for (int64_t n : widths) {
      auto plan = topk::PlanCudaSelection(topk::ProblemShape{k, m, n, topk::Layout::kPitched}, {},
                                          info, config);
      if (!plan.ok()) {
        std::printf("%-6d %-8lld %-8lld error: %s\n", k, static_cast<long long>(m),
                    static_cast<long long>(n), std::string(plan.status().message()).c_str());
        continue;
      }
      std::printf("%-6d %-8lld %-8lld %-20s %-6d %-5d %-6d %-6d %-12zu\n", k,
                  static_cast<long long>(m), static_cast<long long>(n),
                  std::string(topk::RouteName(plan->route)).c_str(), plan->sample_stride,
                  plan->split, plan->grid, plan->block, plan->workspace_bytes);
    }
  }
  return 0;
}
