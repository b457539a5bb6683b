// The churn walk's checks (churn.h): each actor's listing, the segments'
// contents and this process's mappings against the model.
#include <algorithm>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "churn.h"

namespace topk::server::test::churn {

std::map<std::string, int> ShmMappings(const std::string& prefix) {
  std::map<std::string, int> counts;
  std::ifstream maps("/proc/self/maps");
  const std::string needle = "/dev/shm" + prefix;
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find(needle);
    if (at == std::string::npos) continue;
    std::string name = line.substr(at + 8);
    if (const size_t space = name.find(' '); space != std::string::npos) name.resize(space);
    ++counts[name];
  }
  return counts;
}

// The model against the server, after every step.
void Churn::Check() {
  for (Actor& a : actors_) {
    if (a.session != nullptr) CheckListing(a);
    if (::testing::Test::HasFatalFailure()) return;
  }
  CheckMappings();
  for (Actor& a : actors_) {
    for (const auto& d : a.data) {
      ASSERT_TRUE(d->Intact()) << "segment " << d->laid.segment.name() << " of actor " << a.id
                               << " changed where nothing was to write";
    }
    // Keep at most two unregistered segments an actor may register again.
    int spare = 0;
    for (auto it = a.data.end(); it != a.data.begin();) {
      --it;
      if ((*it)->registrations > 0) continue;
      if (++spare > 2) it = a.data.erase(it);
    }
  }
}

// Every session ended, every segment destroyed: nothing of them mapped.
void Churn::Finish() {
  for (Actor& a : actors_) {
    if (a.session != nullptr) EndSession(a, false);
    if (::testing::Test::HasFatalFailure()) return;
  }
  CheckMappings();
  for (Actor& a : actors_) a.data.clear();
  CheckMappings();
  EXPECT_TRUE(ShmMappings(prefix_).empty());
}

void Churn::Report(int64_t steps, double seconds) const {
  std::cout << "region churn: " << steps << " steps in " << seconds << " s\n";
  for (const auto& [kind, count] : counts_) std::cout << "  " << kind << ": " << count << "\n";
  std::cout << "  (lists that first showed a request in flight: " << late_in_flight_
            << "; mapping checks that had to wait: " << late_unmaps_ << ", longest "
            << absl::FormatDuration(longest_wait_) << ")\n";
}

void Churn::CheckListing(Actor& a) {
  const absl::Time deadline = absl::Now() + kReleaseWait;
  bool waited = false;
  for (;;) {
    absl::StatusOr<std::vector<v1::RegionInfo>> listed = a.session->List();
    ASSERT_TRUE(listed.ok()) << listed.status();
    std::vector<std::string> names;
    bool busy = false;
    for (const v1::RegionInfo& info : *listed) {
      names.push_back(info.name());
      ASSERT_EQ(info.kind(), "shm") << info.name();
      ASSERT_EQ(info.device_ordinal(), -1) << info.name();
      auto it = a.regions.find(info.name());
      ASSERT_NE(it, a.regions.end()) << "actor " << a.id << " never registered " << info.name();
      ASSERT_EQ(info.byte_size(), it->second.size) << info.name();
      busy = busy || info.in_flight() != 0;
    }
    std::vector<std::string> model;
    for (const auto& [name, reg] : a.regions) model.push_back(name);
    ASSERT_EQ(names, model) << "actor " << a.id << "'s regions";
    if (!busy) break;
    if (!waited) ++late_in_flight_;
    waited = true;
    ASSERT_LT(absl::Now(), deadline) << "actor " << a.id << " is idle but a region is in flight";
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// One mapping of each live segment (the test's) plus one per live
// registration of it (the server's); none of anything else.
void Churn::CheckMappings() {
  std::map<std::string, int> expected;
  for (const Actor& a : actors_) {
    for (const auto& d : a.data) expected[d->laid.segment.name()] = 1 + d->registrations;
  }
  const absl::Time start = absl::Now();
  std::map<std::string, int> actual = ShmMappings(prefix_);
  while (actual != expected && absl::Now() < start + kReleaseWait) {
    absl::SleepFor(absl::Milliseconds(1));
    actual = ShmMappings(prefix_);
  }
  if (absl::Now() - start > absl::Milliseconds(1)) {
    ++late_unmaps_;
    longest_wait_ = std::max(longest_wait_, absl::Now() - start);
  }
  if (actual == expected) return;
  std::string diff;
  for (const auto& [name, count] : expected) {
    const int have = actual.contains(name) ? actual[name] : 0;
    if (have != count) absl::StrAppend(&diff, name, ": ", have, " mapped, ", count, " expected\n");
  }
  for (const auto& [name, count] : actual) {
    if (!expected.contains(name)) absl::StrAppend(&diff, name, ": ", count, " mapped, gone\n");
  }
  FAIL() << "mappings after " << absl::FormatDuration(kReleaseWait) << ":\n" << diff;
}

}  // namespace topk::server::test::churn
