// The region churn test's walk (region_churn_test.cc): a seeded random
// sequence of steps over the actors of churn_model.h, and the model checked
// against the server after each. The valid operations are churn_steps.cc,
// the requests that must be refused churn_refusals.cc, the checks
// churn_checks.cc.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "churn_model.h"
#include "support/regions.h"

namespace topk::server::test::churn {

class Churn {
 public:
  explicit Churn(uint64_t seed);
  bool started() const { return t_.client != nullptr && side_ != nullptr; }

  // One random step of a random actor.
  void Step();
  // The model against the server, after every step.
  void Check();
  // Every session ended, every segment destroyed: nothing of them mapped.
  void Finish();
  void Report(int64_t steps, double seconds) const;

  const std::map<std::string, int64_t>& counts() const { return counts_; }

 private:
  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  uint64_t Pick64(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Coin(int percent = 50) { return Pick(0, 99) < percent; }
  void Count(const std::string& kind) { ++counts_[kind]; }
  const std::string& PickOf(const std::vector<std::string>& names) {
    return names[Pick(0, static_cast<int>(names.size()) - 1)];
  }

  // The valid operations (churn_steps.cc).
  void Open(Actor& a);
  Dataset* NewDataset(Actor& a);
  // A name the actor does not hold: its own, or one other actors may hold too
  // (the same name in two sessions is two regions).
  std::string FreeName(Actor& a);
  void Register(Actor& a);
  // Random valid rows by reference through `name` (offset 0 of `d`).
  client::RegionRowsRef RowsRef(const std::string& name, const Dataset& d);
  // What a select reads: one of the actor's row regions, its dataset, a K its
  // output rows hold, and the rows by reference (nullopt: no row region).
  struct SelectTarget {
    std::string name;
    Dataset* data = nullptr;
    int32_t k = 0;
    client::RegionRowsRef ref;
  };
  std::optional<SelectTarget> PickSelectTarget(Actor& a);
  void Select(Actor& a);
  void Drop(Actor& a, const std::string& name);
  void Unregister(Actor& a);
  void UnregisterAll(Actor& a);
  // The RegionSession destroyed (what a client's death does to its stream);
  // `in_flight`: while a request of the session runs on another connection.
  void EndSession(Actor& a, bool in_flight);
  // The actor's registrations Select may read rows through, and those that
  // cover the whole of dataset d (where its outputs may go).
  std::vector<std::string> RowRegions(const Actor& a) const;
  std::vector<std::string> WholeRegionsOf(const Actor& a, const Dataset* d) const;

  // The requests that must be refused (churn_refusals.cc).
  v1::RegisterRegionRequest RawRegister(const std::string& session, const std::string& name,
                                        const std::string& shm, uint64_t offset, uint64_t bytes);
  void RegisterRefused(Actor& a);
  void SelectRefused(Actor& a);

  // The model against the server (churn_checks.cc).
  void CheckListing(Actor& a);
  // One mapping of each live segment (the test's) plus one per live
  // registration of it (the server's); none of anything else.
  void CheckMappings();

  std::mt19937 rng_;
  TestServer t_;
  std::unique_ptr<client::Client> side_;  // calls outside every session
  std::string prefix_;
  std::vector<Actor> actors_;
  std::map<std::string, int64_t> counts_;
  int64_t late_in_flight_ = 0;
  int64_t late_unmaps_ = 0;
  absl::Duration longest_wait_ = absl::ZeroDuration();
};

}  // namespace topk::server::test::churn
