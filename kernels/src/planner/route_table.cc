// The route table's lookup (route_table.h); the entries are route_table_data.h,
// written by bench/gpu/route_sweep.py --emit from a sweep's CSV.
#include "route_table.h"

#include <algorithm>

namespace topk::planner {
namespace {

#include "route_table_data.h"

// The smallest value among the entries' `field` at or above `want`, within
// the entries `keep` admits; -1 when none.
template <typename Field, typename Keep>
int64_t SmallestAtOrAbove(std::span<const RouteTableEntry> table, int64_t want, Field field,
                          Keep keep) {
  int64_t best = -1;
  for (const RouteTableEntry& e : table) {
    const int64_t v = field(e);
    if (keep(e) && v >= want && (best < 0 || v < best)) best = v;
  }
  return best;
}

}  // namespace

std::span<const RouteTableEntry> RouteTable() { return kMeasuredRoutes; }

const RouteTableEntry* FindRouteEntry(std::span<const RouteTableEntry> table, int32_t k,
                                      int64_t max_rows, int64_t max_width) {
  if (k > kMaxTableK) return nullptr;
  const auto any = [](const RouteTableEntry&) { return true; };
  // K above the largest measured band takes that band (up to kMaxTableK).
  int64_t band_k = SmallestAtOrAbove(
      table, k, [](const auto& e) { return int64_t{e.max_k}; }, any);
  if (band_k < 0) {
    for (const RouteTableEntry& e : table) band_k = std::max<int64_t>(band_k, e.max_k);
  }
  if (band_k < 0) return nullptr;
  const auto in_k = [&](const RouteTableEntry& e) { return e.max_k == band_k; };
  const int64_t width = SmallestAtOrAbove(
      table, max_width, [](const auto& e) { return e.max_width; }, in_k);
  // A measured width covers its octave (N_cap in (width / 2, width]): the
  // crossovers move with the row length faster than with the row count.
  if (width < 0 || max_width <= width / 2) return nullptr;
  const auto in_cell = [&](const RouteTableEntry& e) { return in_k(e) && e.max_width == width; };
  const int64_t rows = SmallestAtOrAbove(
      table, max_rows, [](const auto& e) { return e.max_rows; }, in_cell);
  if (rows < 0) return nullptr;
  for (const RouteTableEntry& e : table) {
    if (in_cell(e) && e.max_rows == rows) return &e;
  }
  return nullptr;
}

const char* TableChoiceName(TableChoice choice) {
  switch (choice) {
    case TableChoice::kRules:
      return "rules";
    case TableChoice::kPersistent512:
      return "persistent 2x512";
    case TableChoice::kPersistent256:
      return "persistent 4x256";
    case TableChoice::kShortRow:
      return "short-row";
    case TableChoice::kKvSplit2:
      return "kv-split 2";
    case TableChoice::kKvSplit4:
      return "kv-split 4";
    case TableChoice::kKvSplit8:
      return "kv-split 8";
    case TableChoice::kCluster8x1:
      return "cluster 8x1";
    case TableChoice::kCluster8x2:
      return "cluster 8x2";
    case TableChoice::kCluster16x1:
      return "cluster 16x1";
  }
  return "unknown";
}

}  // namespace topk::planner
