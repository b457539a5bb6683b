// topk-bench-gpu's selector flags (bench_config.h).
#include "bench_config.h"

#include <cstdint>

#include "absl/flags/flag.h"

ABSL_FLAG(int32_t, stride, topk::CudaSelectorConfig{}.sample_stride,
          "sample stride s (0: the planner's choice)");
ABSL_FLAG(int32_t, run, topk::CudaSelectorConfig{}.sample_run,
          "consecutive floats per view position group (1 or 8)");
ABSL_FLAG(bool, prefetch, topk::CudaSelectorConfig{}.l2_prefetch,
          "L2 bulk prefetch ahead of the certification pass");
ABSL_FLAG(bool, kv_split, topk::CudaSelectorConfig{}.enable_kv_split,
          "split few long rows over several CTAs");
ABSL_FLAG(int32_t, ctas_per_sm, topk::CudaSelectorConfig{}.ctas_per_sm_target,
          "persistent kernel variant: 0 (planner's choice), 2 (512 threads) or 4 (256)");
ABSL_FLAG(int32_t, alt_ctas_per_sm, -1,
          "A/B: also time a selector with this variant on the same data (-1: none)");
ABSL_FLAG(
    int32_t, admit_ring, topk::CudaSelectorConfig{}.admit_ring,
    "certification pass through the shared-memory ring: 1 on, 0 off, -1 the variant's default");
ABSL_FLAG(int32_t, alt_admit_ring, -2,
          "time a second selector with this admit_ring (-2: none) on the same data");
ABSL_FLAG(int64_t, short_rows, -1,
          "short-row route: -1 the planner's table, 0 off, W > 0 every N_cap <= W");
ABSL_FLAG(int64_t, alt_short_rows, -2,
          "A/B: also time a selector with this short-row setting (as --short_rows; -2: none)");
ABSL_FLAG(bool, kv_split_band, topk::CudaSelectorConfig{}.kv_split_band,
          "KV-split: keep the band apart in the segment CTAs");
ABSL_FLAG(int32_t, alt_kv_split_band, -1,
          "A/B: the second selector's kv_split_band (0 or 1; -1: as --kv_split_band)");
ABSL_FLAG(int32_t, short_row_variant, topk::CudaSelectorConfig{}.short_row_variant,
          "short-row kernel variant (topk/cuda/short_row_variant.h bits)");
ABSL_FLAG(int32_t, alt_short_row_variant, -1,
          "A/B: the second selector's short-row kernel variant (-1: as --short_row_variant)");
ABSL_FLAG(int32_t, cluster, topk::CudaSelectorConfig{}.cluster_route,
          "cluster route: 0 the planner's table, 1 every bucket it serves, -1 off");
ABSL_FLAG(int32_t, cluster_size, topk::CudaSelectorConfig{}.cluster_size, "CTAs per cluster");
ABSL_FLAG(int32_t, alt_cluster, -2,
          "A/B: also time a selector with this cluster setting (as --cluster; -2: none)");
ABSL_FLAG(int32_t, alt_cluster_size, topk::CudaSelectorConfig{}.cluster_size,
          "CTAs per cluster of the --alt_cluster selector");
ABSL_FLAG(int32_t, cluster_ctas_per_sm, topk::CudaSelectorConfig{}.cluster_ctas_per_sm,
          "cluster kernel variant: 1 or 2 CTAs per SM (0: the planner's)");
ABSL_FLAG(int32_t, alt_cluster_ctas_per_sm, topk::CudaSelectorConfig{}.cluster_ctas_per_sm,
          "cluster kernel variant of the --alt_cluster selector");
ABSL_FLAG(int32_t, resident, topk::CudaSelectorConfig{}.resident_route,
          "resident decode route: 0 the planner's region, 1 every bucket it serves, -1 off");
ABSL_FLAG(int32_t, resident_cluster_size, topk::CudaSelectorConfig{}.resident_cluster_size,
          "CTAs per cluster of the resident route (0: the planner's)");
ABSL_FLAG(int32_t, resident_threads, topk::CudaSelectorConfig{}.resident_threads,
          "threads per CTA of the resident route: 512 or 1024 (0: the planner's)");
ABSL_FLAG(int32_t, alt_resident, -2,
          "A/B: also time a selector with this resident setting (as --resident; -2: none)");
ABSL_FLAG(bool, route_table, topk::CudaSelectorConfig{}.use_route_table,
          "the planner's measured route table (false: its rules alone)");
ABSL_FLAG(int32_t, kv_split_force, topk::CudaSelectorConfig{}.kv_split_force,
          "CudaSelectorConfig::kv_split_force: 2/4/8 the KV-split route with that split on every "
          "sampled shape, 0 the planner");
ABSL_FLAG(int32_t, alt_kv_split_force, -1,
          ">= 0: time a second selector with that kv_split_force on the same data");

namespace topk::bench {
namespace {

// The selector configuration for a --short_rows value.
void ApplyShortRows(int64_t setting, CudaSelectorConfig* cfg) {
  if (setting == 0) cfg->enable_short_rows = false;
  if (setting > 0) cfg->short_row_max_width = setting;
}

}  // namespace

CudaSelectorConfig SelectorConfigFromFlags() {
  CudaSelectorConfig cfg;
  cfg.sample_stride = absl::GetFlag(FLAGS_stride);
  cfg.sample_run = absl::GetFlag(FLAGS_run);
  cfg.l2_prefetch = absl::GetFlag(FLAGS_prefetch);
  cfg.enable_kv_split = absl::GetFlag(FLAGS_kv_split);
  cfg.ctas_per_sm_target = absl::GetFlag(FLAGS_ctas_per_sm);
  cfg.admit_ring = absl::GetFlag(FLAGS_admit_ring);
  ApplyShortRows(absl::GetFlag(FLAGS_short_rows), &cfg);
  cfg.short_row_variant = absl::GetFlag(FLAGS_short_row_variant);
  cfg.kv_split_band = absl::GetFlag(FLAGS_kv_split_band);
  cfg.kv_split_force = absl::GetFlag(FLAGS_kv_split_force);
  cfg.cluster_route = absl::GetFlag(FLAGS_cluster);
  cfg.cluster_size = absl::GetFlag(FLAGS_cluster_size);
  cfg.cluster_ctas_per_sm = absl::GetFlag(FLAGS_cluster_ctas_per_sm);
  cfg.resident_route = absl::GetFlag(FLAGS_resident);
  cfg.resident_cluster_size = absl::GetFlag(FLAGS_resident_cluster_size);
  cfg.resident_threads = absl::GetFlag(FLAGS_resident_threads);
  cfg.use_route_table = absl::GetFlag(FLAGS_route_table);
  return cfg;
}

std::optional<CudaSelectorConfig> AltConfigFromFlags(const CudaSelectorConfig& base) {
  const int alt_ctas = absl::GetFlag(FLAGS_alt_ctas_per_sm);
  const int64_t alt_short_rows = absl::GetFlag(FLAGS_alt_short_rows);
  const int alt_cluster = absl::GetFlag(FLAGS_alt_cluster);
  const int alt_ring = absl::GetFlag(FLAGS_alt_admit_ring);
  const int alt_short_row_variant = absl::GetFlag(FLAGS_alt_short_row_variant);
  const int alt_kv_split_band = absl::GetFlag(FLAGS_alt_kv_split_band);
  const int alt_kv_split_force = absl::GetFlag(FLAGS_alt_kv_split_force);
  const int alt_resident = absl::GetFlag(FLAGS_alt_resident);
  if (alt_ctas < 0 && alt_short_rows < -1 && alt_cluster < -1 && alt_ring < -1 &&
      alt_short_row_variant < 0 && alt_kv_split_band < 0 && alt_kv_split_force < 0 &&
      alt_resident < -1) {
    return std::nullopt;
  }
  CudaSelectorConfig alt = base;
  if (alt_kv_split_force >= 0) alt.kv_split_force = alt_kv_split_force;
  if (alt_resident >= -1) alt.resident_route = alt_resident;
  if (alt_kv_split_band >= 0) alt.kv_split_band = alt_kv_split_band != 0;
  if (alt_short_row_variant >= 0) alt.short_row_variant = alt_short_row_variant;
  if (alt_cluster >= -1) {
    alt.cluster_route = alt_cluster;
    alt.cluster_size = absl::GetFlag(FLAGS_alt_cluster_size);
    alt.cluster_ctas_per_sm = absl::GetFlag(FLAGS_alt_cluster_ctas_per_sm);
  }
  if (alt_ctas >= 0) alt.ctas_per_sm_target = alt_ctas;
  if (alt_ring >= -1) alt.admit_ring = alt_ring;
  if (alt_short_rows >= -1) {
    alt.enable_short_rows = CudaSelectorConfig{}.enable_short_rows;
    alt.short_row_max_width = 0;
    ApplyShortRows(alt_short_rows, &alt);
  }
  return alt;
}

}  // namespace topk::bench
