// The region churn test's model (region_churn_test.cc): what each client
// "actor" holds (its session, segments and registrations) and what every
// segment must contain, against which the server is checked after each step.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "support/regions.h"

namespace topk::server::test::churn {

inline constexpr int kActors = 4;
inline constexpr size_t kMaxRegionsPerActor = 6;
// How long a release may trail the reply that ends its last request.
inline constexpr absl::Duration kReleaseWait = absl::Seconds(1);

// This process's mappings of the test's segments, by shm name (an unlinked
// object shows as "/dev/shm/name (deleted)": counted under its name).
std::map<std::string, int> ShmMappings(const std::string& prefix);

// Rows laid out in a segment of their own, and what the segment must hold.
struct Dataset {
  tools::PackedRows rows;
  SegmentRows laid;
  std::vector<std::byte> shadow;
  int registrations = 0;  // live in the model

  void Snapshot() { shadow.assign(laid.segment.data(), laid.segment.data() + laid.segment.size()); }
  // The output areas back to their sentinels (the test's own write).
  void ResetOutputs() {
    int32_t* indices = laid.segment.at<int32_t>(laid.indices_at);
    float* values = laid.segment.at<float>(laid.values_at);
    for (int64_t i = 0; i < laid.num_rows * laid.stride; ++i) {
      indices[i] = SegmentRows::kSentinel;
      values[i] = -12345.0f;
    }
    Snapshot();
  }
  bool Intact() const {
    return std::memcmp(shadow.data(), laid.segment.data(), shadow.size()) == 0;
  }
};

enum class RegionKind { kWhole, kRows, kWindow };

struct Registration {
  Dataset* data = nullptr;
  RegionKind kind = RegionKind::kWhole;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct Actor {
  int id = 0;
  std::unique_ptr<client::RegionSession> session;
  std::string session_id;
  std::map<std::string, Registration> regions;  // name order, as ListRegions
  std::vector<std::unique_ptr<Dataset>> data;
  std::set<std::string> dropped;  // names unregistered in this session
  std::vector<std::string> dead_ids;
  int names = 0;
};

}  // namespace topk::server::test::churn
