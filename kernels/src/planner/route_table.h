// The planner's measured route table: for the buckets the route sweep
// measured (tools/gpu-lab/route-sweep.sh on the H200, every route and kernel
// variant forced on the same rows), the one that measured fastest, by K band,
// N_cap band and M_cap band. Buckets it does not cover (wider rows, more rows,
// K above 4096, a configuration that forces a route) keep the planner's rules
// (cuda_planner.cc), which were measured at K = 2048 on the operator matrix.
#pragma once

#include <cstdint>
#include <span>

namespace topk::planner {

// What a cell of the table asks for. kRules: the rules measured within noise
// of the fastest there (or nothing else was faster), so the rules decide.
enum class TableChoice : uint8_t {
  kRules,
  kPersistent512,  // one CTA per row at a time, 2 CTAs of 512 threads per SM
  kPersistent256,  // the same, 4 CTAs of 256 threads per SM
  kShortRow,       // one 256-thread CTA per row, no sampling
  kKvSplit2,       // each row split over 2, 4 or 8 CTAs
  kKvSplit4,
  kKvSplit8,
  kCluster8x1,  // one thread-block cluster of 8 CTAs per row, 1 CTA per SM
  kCluster8x2,  // ... 2 CTAs per SM
  kCluster16x1,
};

// One measured corner: it covers K up to max_k (from above the next smaller
// measured K), N_cap in (max_width / 2, max_width] and M_cap up to max_rows
// (from above the next smaller measured M at that K and width).
struct RouteTableEntry {
  int32_t max_k;
  int64_t max_width;
  int64_t max_rows;
  TableChoice choice;
  double best_us;   // the choice's median at the corner
  double rules_us;  // the rules' median there, same run
};

// The K bands the table holds: a K is looked up in the band of the smallest
// measured K at or above it, up to kMaxTableK.
inline constexpr int32_t kMaxTableK = 4096;

std::span<const RouteTableEntry> RouteTable();
// The entry covering this bucket, or nullptr (the rules decide).
const RouteTableEntry* FindRouteEntry(std::span<const RouteTableEntry> table, int32_t k,
                                      int64_t max_rows, int64_t max_width);
const char* TableChoiceName(TableChoice choice);

}  // namespace topk::planner
