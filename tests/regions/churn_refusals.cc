// The churn walk's refusals (churn.h): registrations and selects that must
// be refused with the status a careful reader of the proto expects, and
// leave every segment as it was.
#include <iterator>
#include <limits>

#include "churn.h"

namespace topk::server::test::churn {

v1::RegisterRegionRequest Churn::RawRegister(const std::string& session, const std::string& name,
                                             const std::string& shm, uint64_t offset,
                                             uint64_t bytes) {
  v1::RegisterRegionRequest request;
  request.set_session_id(session);
  request.set_name(name);
  request.mutable_shm()->set_shm_name(shm);
  request.mutable_shm()->set_offset(offset);
  request.mutable_shm()->set_byte_size(bytes);
  return request;
}

void Churn::RegisterRefused(Actor& a) {
  Dataset* d = a.data.empty() ? NewDataset(a) : a.data[Pick(0, int(a.data.size()) - 1)].get();
  const std::string& shm = d->laid.segment.name();
  const uint64_t size = d->laid.segment.size();
  std::string name = FreeName(a);
  absl::Status status;
  absl::StatusCode expected = absl::StatusCode::kInvalidArgument;
  int which = Pick(0, 6);
  if (which == 4 && a.regions.empty()) which = 3;
  switch (which) {
    case 0: {
      Count("register refused: past the object");
      const uint64_t offset = Pick64(0, size);
      status = a.session->RegisterShm(name, shm, offset, size - offset + Pick64(1, 8192));
      break;
    }
    case 1:
      Count("register refused: empty range");
      status = a.session->RegisterShm(name, shm, Pick64(0, size - 1), 0);
      break;
    case 2:
      Count("register refused: offset + size wraps");
      status = a.session->RegisterShm(name, shm, std::numeric_limits<uint64_t>::max() - Pick(0, 99),
                                      Pick64(100, size));
      break;
    case 3:
      Count("register refused: no ownership proof");
      expected = absl::StatusCode::kPermissionDenied;
      status = a.session->Register(RawRegister(a.session_id, name, shm, 0, size));
      break;
    case 4: {
      Count("register refused: name taken");
      expected = absl::StatusCode::kAlreadyExists;
      auto it = a.regions.begin();
      std::advance(it, Pick(0, int(a.regions.size()) - 1));
      name = it->first;
      status = a.session->Register(name, d->laid.segment);
      break;
    }
    case 5: {
      Count("register refused: ended or unknown session");
      expected = absl::StatusCode::kNotFound;
      const std::string dead =
          a.dead_ids.empty() ? "0123456789abcdef0123456789abcdef" : a.dead_ids.back();
      status = a.session->Register(RawRegister(dead, name, shm, 0, size));
      break;
    }
    case 6:
      Count("register refused: no such object");
      status = a.session->RegisterShm(name, UniqueShmName("absent"), 0, 4096);
      break;
  }
  ASSERT_EQ(status.code(), expected) << status << " (case " << which << ")";
}

void Churn::SelectRefused(Actor& a) {
  const std::optional<SelectTarget> target = PickSelectTarget(a);
  if (!target) return Register(a);
  const std::string& name = target->name;
  Dataset& d = *target->data;
  const int32_t k = target->k;
  const client::RegionRowsRef& ref = target->ref;
  const std::vector<std::string> outputs = WholeRegionsOf(a, &d);
  client::RegionOutputRef out{.indices = {name, d.laid.indices_at}, .row_stride = d.laid.stride};
  if (!outputs.empty()) out.indices.region = PickOf(outputs);
  v1::SelectRequest request = a.session->MakeRequest(k, ref, &out, {});
  absl::StatusCode expected = absl::StatusCode::kInvalidArgument;
  int which = Pick(0, 5);
  std::string foreign;
  if (which == 1) {
    std::vector<std::string> theirs;
    for (const Actor& other : actors_) {
      if (&other == &a || other.session == nullptr) continue;
      for (const auto& [n, reg] : other.regions) {
        if (!a.regions.contains(n)) theirs.push_back(n);
      }
    }
    if (theirs.empty()) {
      which = 2;
    } else {
      foreign = PickOf(theirs);
    }
  }
  if (which == 5 && a.dead_ids.empty()) which = 2;
  switch (which) {
    case 0: {
      Count("select refused: offset past the region");
      auto it = a.regions.begin();
      std::advance(it, Pick(0, int(a.regions.size()) - 1));
      request.mutable_region_rows()->mutable_scores()->set_region(it->first);
      request.mutable_region_rows()->mutable_scores()->set_offset(it->second.size +
                                                                  4 * Pick64(1, 64));
      break;
    }
    case 1:
      Count("select refused: another session's region");
      expected = absl::StatusCode::kNotFound;
      if (Coin()) {
        request.mutable_region_rows()->mutable_scores()->set_region(foreign);
      } else {
        request.mutable_output()->mutable_indices()->set_region(foreign);
      }
      break;
    case 2: {
      Count("select refused: unregistered region");
      expected = absl::StatusCode::kNotFound;
      std::string gone = "never-registered";
      if (!a.dropped.empty() && Coin(70)) {
        auto it = a.dropped.begin();
        std::advance(it, Pick(0, int(a.dropped.size()) - 1));
        gone = *it;
      }
      request.mutable_region_rows()->mutable_scores()->set_region(gone);
      break;
    }
    case 3: {
      Count("select refused: output over its rows");
      // The start of the longest row (or the lengths, when every row is empty).
      int64_t longest = 0;
      for (int64_t r = 1; r < d.laid.num_rows; ++r) {
        if (d.rows.lengths[r] > d.rows.lengths[longest]) longest = r;
      }
      uint64_t at = 0;
      if (d.rows.lengths[longest] > 0) {
        at =
            d.laid.pitch > 0
                ? static_cast<uint64_t>(longest * d.laid.pitch) * 4
                : static_cast<uint64_t>(d.laid.segment.at<int64_t>(d.laid.offsets_at)[longest]) * 4;
      } else {
        request.mutable_region_rows()->clear_lengths();
        request.mutable_region_rows()->set_width(static_cast<int32_t>(d.rows.width));
        request.mutable_region_rows()->mutable_lengths_ref()->set_region(name);
        request.mutable_region_rows()->mutable_lengths_ref()->set_offset(d.laid.lengths_at);
        at = d.laid.lengths_at;
      }
      // Through a whole-segment region other than (or the same as) the
      // rows' one: the check is by memory, not by name.
      request.mutable_output()->mutable_indices()->set_offset(at);
      break;
    }
    case 4: {
      Count("select refused: output past the region");
      const Registration& reg = a.regions[request.output().indices().region()];
      // Fewer than the k cells of row 0 left before the end.
      const uint64_t left = 4 * Pick64(0, std::min<uint64_t>(uint64_t(k) - 1, 8));
      request.mutable_output()->mutable_indices()->set_offset(reg.size - left);
      break;
    }
    case 5:
      Count("select refused: ended session");
      expected = absl::StatusCode::kNotFound;
      request.set_session_id(a.dead_ids[Pick(0, int(a.dead_ids.size()) - 1)]);
      break;
  }
  absl::StatusOr<client::SelectResult> result = a.session->Select(request);
  ASSERT_FALSE(result.ok()) << "case " << which << " was served: " << request.ShortDebugString();
  ASSERT_EQ(result.status().code(), expected)
      << result.status() << " (case " << which << "): " << request.ShortDebugString();
}

}  // namespace topk::server::test::churn
