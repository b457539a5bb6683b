// The region protocol under fuzz and churn: a seeded random walk over a few
// client "actors" (each with its own session, segments and registrations)
// of OpenSession, Register (valid ranges, and invalid ones that must be
// refused), Select by reference (random valid layouts answered exactly, and
// invalid references refused without a byte written), Unregister (one or
// all) and session death (the RegionSession destroyed, as a client dying
// does; sometimes with a request of the session in flight). After every step
// the model of what each actor holds is checked against the server:
//   * ListRegions names what the actor registered (names, sizes), none in
//     flight once the actor is idle;
//   * the server maps each segment exactly once per registration of it that
//     is alive (this process's /proc/self/maps: the server runs in-process),
//     so every mapping is gone once its registration or session ends and
//     its requests are done;
//   * every segment holds exactly what the test wrote and the answers it
//     asked for: a valid Select writes its K cells per output row and
//     nothing else (the sentinels past K intact), a refused one nothing, and
//     no session touches another's memory (the same name in two sessions is
//     two regions: each answer is exact for the actor's own rows);
//   * an ended session is gone (ListRegions, Select and Register: NOT_FOUND).
// TOPK_CHURN_SECONDS (default 60) bounds the walk, TOPK_CHURN_SEED replays one.
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "support/regions.h"

namespace topk::server::test {
namespace {

using testing::Distribution;
using testing::LengthPattern;

constexpr int kActors = 4;
constexpr size_t kMaxRegionsPerActor = 6;
// How long a release may trail the reply that ends its last request.
constexpr absl::Duration kReleaseWait = absl::Seconds(1);

double ChurnSeconds() {
  const char* text = std::getenv("TOPK_CHURN_SECONDS");
  return text != nullptr && *text != '\0' ? std::atof(text) : 60.0;
}

uint64_t ChurnSeed() {
  const char* text = std::getenv("TOPK_CHURN_SEED");
  if (text != nullptr && *text != '\0') return std::strtoull(text, nullptr, 10);
  return std::random_device{}();
}

// This process's mappings of the test's segments, by shm name (an unlinked
// object shows as "/dev/shm/name (deleted)": counted under its name).
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

class Churn {
 public:
  explicit Churn(uint64_t seed) : rng_(seed) {
    t_ = StartServer(RegionServerOptions());
    if (t_.client == nullptr) return;
    side_ = t_.NewClient();
    prefix_ = absl::StrCat("/topk-test-", getpid(), "-");  // every segment UniqueShmName names
    for (int i = 0; i < kActors; ++i) actors_.push_back(Actor{.id = i});
  }
  bool started() const { return t_.client != nullptr && side_ != nullptr; }

  void Step() {
    Actor& a = actors_[Pick(0, kActors - 1)];
    if (a.session == nullptr) return Open(a);
    const int roll = Pick(0, 99);
    if (roll < 20) return Register(a);
    if (roll < 30) return RegisterRefused(a);
    if (roll < 62) return Select(a);
    if (roll < 82) return SelectRefused(a);
    if (roll < 90) return Unregister(a);
    if (roll < 92) return UnregisterAll(a);
    if (roll < 96) return EndSession(a, /*in_flight=*/false);
    return EndSession(a, /*in_flight=*/true);
  }

  // The model against the server, after every step.
  void Check() {
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
  void Finish() {
    for (Actor& a : actors_) {
      if (a.session != nullptr) EndSession(a, false);
      if (::testing::Test::HasFatalFailure()) return;
    }
    CheckMappings();
    for (Actor& a : actors_) a.data.clear();
    CheckMappings();
    EXPECT_TRUE(ShmMappings(prefix_).empty());
  }

  void Report(int64_t steps, double seconds) const {
    std::cout << "region churn: " << steps << " steps in " << seconds << " s\n";
    for (const auto& [kind, count] : counts_) std::cout << "  " << kind << ": " << count << "\n";
    std::cout << "  (lists that first showed a request in flight: " << late_in_flight_
              << "; mapping checks that had to wait: " << late_unmaps_ << ", longest "
              << absl::FormatDuration(longest_wait_) << ")\n";
  }

  const std::map<std::string, int64_t>& counts() const { return counts_; }

 private:
  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  uint64_t Pick64(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Coin(int percent = 50) { return Pick(0, 99) < percent; }
  void Count(const std::string& kind) { ++counts_[kind]; }

  void Open(Actor& a) {
    Count("open");
    const client::CallPath path = Coin() ? client::CallPath::kStream : client::CallPath::kUnary;
    absl::StatusOr<std::unique_ptr<client::RegionSession>> session =
        client::RegionSession::Open(*t_.client, path);
    ASSERT_TRUE(session.ok()) << session.status();
    a.session = *std::move(session);
    a.session_id = a.session->id();
    ASSERT_EQ(a.session_id.size(), 32u);
    for (const Actor& other : actors_) {
      if (&other != &a) {
        ASSERT_NE(other.session_id, a.session_id);
      }
    }
    a.dropped.clear();
  }

  Dataset* NewDataset(Actor& a) {
    static constexpr Distribution kDistributions[] = {Distribution::kUniform, Distribution::kNormal,
                                                      Distribution::kIndexer,
                                                      Distribution::kBf16Ties};
    static constexpr LengthPattern kLengths[] = {LengthPattern::kRandom, LengthPattern::kFull,
                                                 LengthPattern::kEdges};
    const int32_t k_max = Pick(1, 64);
    const int64_t stride = k_max + Pick(0, 3);
    auto d = std::make_unique<Dataset>();
    d->rows = Rows(kDistributions[Pick(0, 3)], Pick(1, 6), Pick(200, 4000), kLengths[Pick(0, 2)],
                   Pick64(1, 1u << 30), k_max);
    d->laid = LayOut(d->rows, Coin() ? RowLayout::kPitched : RowLayout::kPackedOffsets, stride);
    d->Snapshot();
    a.data.push_back(std::move(d));
    return a.data.back().get();
  }

  // A name the actor does not hold: its own, or one other actors may hold too
  // (the same name in two sessions is two regions).
  std::string FreeName(Actor& a) {
    if (Coin(30)) {
      const std::string shared = absl::StrCat("shared-", Pick(0, 2));
      if (!a.regions.contains(shared)) return shared;
    }
    return absl::StrCat("a", a.id, "-r", a.names++);
  }

  void Register(Actor& a) {
    if (a.regions.size() >= kMaxRegionsPerActor) return Unregister(a);
    const std::string name = FreeName(a);
    Registration reg;
    if (!a.data.empty() && Coin(40)) {
      reg.data = a.data[Pick(0, static_cast<int>(a.data.size()) - 1)].get();
      reg.kind = static_cast<RegionKind>(Pick(0, 2));
    } else {
      reg.data = NewDataset(a);
    }
    const client::SharedMemorySegment& segment = reg.data->laid.segment;
    absl::Status status;
    switch (reg.kind) {
      case RegionKind::kWhole:
        Count("register: whole segment");
        reg.size = segment.size();
        status = a.session->Register(name, segment);
        break;
      case RegionKind::kRows:  // the rows, offsets and lengths; not the outputs
        Count("register: rows only");
        reg.size = reg.data->laid.indices_at;
        status = a.session->RegisterShm(name, segment.name(), 0, reg.size);
        break;
      case RegionKind::kWindow:  // anywhere in the first page (mmap's lead)
        Count("register: window");
        reg.offset = 4 * Pick64(0, std::min<uint64_t>(1023, segment.size() / 4 - 1));
        reg.size = Pick64(1, segment.size() - reg.offset);
        status = a.session->RegisterShm(name, segment.name(), reg.offset, reg.size);
        break;
    }
    ASSERT_TRUE(status.ok()) << status << " registering " << name;
    ++reg.data->registrations;
    a.regions[name] = reg;
    a.dropped.erase(name);
  }

  v1::RegisterRegionRequest RawRegister(const std::string& session, const std::string& name,
                                        const std::string& shm, uint64_t offset, uint64_t bytes) {
    v1::RegisterRegionRequest request;
    request.set_session_id(session);
    request.set_name(name);
    request.mutable_shm()->set_shm_name(shm);
    request.mutable_shm()->set_offset(offset);
    request.mutable_shm()->set_byte_size(bytes);
    return request;
  }

  void RegisterRefused(Actor& a) {
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
        status = a.session->RegisterShm(
            name, shm, std::numeric_limits<uint64_t>::max() - Pick(0, 99), Pick64(100, size));
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

  // The actor's registrations Select may read rows through.
  std::vector<std::string> RowRegions(const Actor& a) const {
    std::vector<std::string> names;
    for (const auto& [name, reg] : a.regions) {
      if (reg.kind != RegionKind::kWindow) names.push_back(name);
    }
    return names;
  }
  std::vector<std::string> WholeRegionsOf(const Actor& a, const Dataset* d) const {
    std::vector<std::string> names;
    for (const auto& [name, reg] : a.regions) {
      if (reg.kind == RegionKind::kWhole && reg.data == d) names.push_back(name);
    }
    return names;
  }
  const std::string& PickOf(const std::vector<std::string>& names) {
    return names[Pick(0, static_cast<int>(names.size()) - 1)];
  }

  // Random valid rows by reference through `name` (offset 0 of `d`).
  client::RegionRowsRef RowsRef(const std::string& name, const Dataset& d) {
    client::RegionRowsRef ref;
    ref.scores = {name, 0};
    ref.num_rows = static_cast<int32_t>(d.laid.num_rows);
    if (d.laid.pitch > 0) {
      ref.row_pitch = d.laid.pitch;
    } else {
      ref.row_offsets = client::RegionSlice{name, d.laid.offsets_at};
    }
    if (Coin()) {
      ref.lengths = d.rows.lengths;
    } else {
      ref.lengths_ref = client::RegionSlice{name, d.laid.lengths_at};
      ref.width = static_cast<int32_t>(d.rows.width);
    }
    return ref;
  }

  void Select(Actor& a) {
    const std::vector<std::string> sources = RowRegions(a);
    if (sources.empty()) return Register(a);
    const std::string& name = PickOf(sources);
    Dataset& d = *a.regions[name].data;
    const auto k = static_cast<int32_t>(Pick(1, static_cast<int>(d.laid.stride)));
    const client::RegionRowsRef ref = RowsRef(name, d);
    const client::CallOptions options{
        .sorted = Coin(), .deterministic = Coin(30), .return_values = Coin()};
    const ::topk::SelectOptions verify{.sorted = options.sorted,
                                       .deterministic = options.deterministic};
    const std::vector<std::string> outputs = WholeRegionsOf(a, &d);
    if (outputs.empty() || Coin(25)) {
      Count("select: answer inline");
      absl::StatusOr<client::SelectResult> result = a.session->Select(k, ref, nullptr, options);
      ASSERT_TRUE(result.ok()) << result.status();
      const absl::Status exact = tools::Verify(d.rows, k, verify, *result);
      ASSERT_TRUE(exact.ok()) << exact;
      return;
    }
    Count(options.return_values ? "select: indices and values by reference"
                                : "select: indices by reference");
    const std::string& out_name = PickOf(outputs);
    client::RegionOutputRef out{.indices = {out_name, d.laid.indices_at},
                                .row_stride = d.laid.stride};
    if (options.return_values) out.values = client::RegionSlice{out_name, d.laid.values_at};
    d.ResetOutputs();
    absl::StatusOr<client::SelectResult> result = a.session->Select(k, ref, &out, options);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->indices.empty());
    const absl::Status exact =
        tools::Verify(d.rows, k, verify, ReadBack(d.laid, k, options.return_values));
    ASSERT_TRUE(exact.ok()) << exact;
    // Written: the first k cells of each output row, nothing else (the
    // sentinels past k, the rows, the other output when not asked for).
    std::vector<std::byte> expected = d.shadow;
    const auto copy_cells = [&](uint64_t at) {
      for (int64_t r = 0; r < d.laid.num_rows; ++r) {
        const uint64_t from = at + static_cast<uint64_t>(r * d.laid.stride) * 4;
        std::memcpy(expected.data() + from, d.laid.segment.data() + from, size_t(k) * 4);
      }
    };
    copy_cells(d.laid.indices_at);
    if (options.return_values) copy_cells(d.laid.values_at);
    ASSERT_EQ(std::memcmp(expected.data(), d.laid.segment.data(), expected.size()), 0)
        << "the select wrote outside its K output cells";
    d.shadow = std::move(expected);
  }

  void SelectRefused(Actor& a) {
    const std::vector<std::string> sources = RowRegions(a);
    if (sources.empty()) return Register(a);
    const std::string& name = PickOf(sources);
    Dataset& d = *a.regions[name].data;
    const auto k = static_cast<int32_t>(Pick(1, static_cast<int>(d.laid.stride)));
    const client::RegionRowsRef ref = RowsRef(name, d);
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
          at = d.laid.pitch > 0
                   ? static_cast<uint64_t>(longest * d.laid.pitch) * 4
                   : static_cast<uint64_t>(d.laid.segment.at<int64_t>(d.laid.offsets_at)[longest]) *
                         4;
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

  void Drop(Actor& a, const std::string& name) {
    --a.regions[name].data->registrations;
    a.regions.erase(name);
    a.dropped.insert(name);
  }

  void Unregister(Actor& a) {
    if (a.regions.empty() || Coin(10)) {
      Count("unregister refused: not registered");
      const absl::Status status = a.session->Unregister(
          a.dropped.empty() || Coin() ? "never-registered" : *a.dropped.begin());
      ASSERT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
      return;
    }
    Count("unregister: one");
    auto it = a.regions.begin();
    std::advance(it, Pick(0, int(a.regions.size()) - 1));
    const std::string name = it->first;
    const absl::Status status = a.session->Unregister(name);
    ASSERT_TRUE(status.ok()) << status;
    Drop(a, name);
  }

  void UnregisterAll(Actor& a) {
    Count("unregister: all");
    absl::StatusOr<int> removed = a.session->UnregisterAll();
    ASSERT_TRUE(removed.ok()) << removed.status();
    ASSERT_EQ(*removed, static_cast<int>(a.regions.size()));
    while (!a.regions.empty()) Drop(a, a.regions.begin()->first);
  }

  // The RegionSession destroyed (what a client's death does to its stream);
  // `in_flight`: while a request of the session runs on another connection.
  void EndSession(Actor& a, bool in_flight) {
    const std::vector<std::string> sources = RowRegions(a);
    std::thread caller;
    absl::StatusOr<client::SelectResult> result;
    Dataset* d = nullptr;
    int32_t k = 0;
    if (in_flight && !sources.empty()) {
      Count("end session: a request in flight");
      const std::string& name = PickOf(sources);
      d = a.regions[name].data;
      k = static_cast<int32_t>(Pick(1, static_cast<int>(d->laid.stride)));
      const v1::SelectRequest request = a.session->MakeRequest(k, RowsRef(name, *d), nullptr, {});
      caller = std::thread([&, request] { result = side_->Select(request); });
      absl::SleepFor(absl::Microseconds(Pick(0, 2000)));
    } else {
      Count("end session: idle");
    }
    a.session.reset();
    if (caller.joinable()) {
      caller.join();
      if (result.ok()) {
        Count("end session: the request in flight answered");
        const absl::Status exact = tools::Verify(d->rows, k, {}, *result);
        ASSERT_TRUE(exact.ok()) << exact;
      } else {
        Count("end session: the request in flight refused");
        ASSERT_EQ(result.status().code(), absl::StatusCode::kNotFound) << result.status();
      }
    }
    for (auto& [name, reg] : a.regions) --reg.data->registrations;
    a.regions.clear();
    a.dropped.clear();
    a.dead_ids.push_back(a.session_id);
    if (a.dead_ids.size() > 4) a.dead_ids.erase(a.dead_ids.begin());
    // The server learns of it from the stream's cancellation.
    absl::Status gone = ListFor(*side_, a.session_id).status();
    for (const absl::Time deadline = absl::Now() + kReleaseWait;
         gone.code() != absl::StatusCode::kNotFound && absl::Now() < deadline;) {
      absl::SleepFor(absl::Milliseconds(2));
      gone = ListFor(*side_, a.session_id).status();
    }
    ASSERT_EQ(gone.code(), absl::StatusCode::kNotFound)
        << "session " << a.session_id << " still listed " << absl::FormatDuration(kReleaseWait)
        << " after its end: " << gone;
    a.session_id.clear();
  }

  void CheckListing(Actor& a) {
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
  void CheckMappings() {
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
      if (have != count)
        absl::StrAppend(&diff, name, ": ", have, " mapped, ", count, " expected\n");
    }
    for (const auto& [name, count] : actual) {
      if (!expected.contains(name)) absl::StrAppend(&diff, name, ": ", count, " mapped, gone\n");
    }
    FAIL() << "mappings after " << absl::FormatDuration(kReleaseWait) << ":\n" << diff;
  }

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

TEST(RegionChurn, RandomSessionsRegistrationsAndSelectsKeepTheInvariants) {
  const uint64_t seed = ChurnSeed();
  const double seconds = ChurnSeconds();
  std::cout << "region churn: seed " << seed << " (TOPK_CHURN_SEED), " << seconds
            << " s (TOPK_CHURN_SECONDS)\n";
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  SCOPED_TRACE(absl::StrCat("TOPK_CHURN_SEED=", seed));
  Churn churn(seed);
  ASSERT_TRUE(churn.started());
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(seconds);
  int64_t steps = 0;
  while (absl::Now() < end) {
    SCOPED_TRACE(absl::StrCat("step ", steps));
    churn.Step();
    if (HasFatalFailure()) break;
    churn.Check();
    if (HasFatalFailure()) break;
    ++steps;
  }
  const int64_t failed_at = HasFatalFailure() ? steps : -1;
  if (failed_at < 0) churn.Finish();
  churn.Report(steps, absl::ToDoubleSeconds(absl::Now() - start));
  ASSERT_LT(failed_at, 0) << "failed at step " << failed_at << " of seed " << seed;
  // Every kind of action ran (a minute covers thousands of steps).
  for (const char* kind : {"open",
                           "register: whole segment",
                           "register: rows only",
                           "register: window",
                           "register refused: past the object",
                           "register refused: empty range",
                           "register refused: offset + size wraps",
                           "register refused: no ownership proof",
                           "register refused: name taken",
                           "register refused: ended or unknown session",
                           "register refused: no such object",
                           "select: answer inline",
                           "select: indices by reference",
                           "select: indices and values by reference",
                           "select refused: offset past the region",
                           "select refused: another session's region",
                           "select refused: unregistered region",
                           "select refused: output over its rows",
                           "select refused: output past the region",
                           "select refused: ended session",
                           "unregister: one",
                           "unregister: all",
                           "unregister refused: not registered",
                           "end session: idle",
                           "end session: a request in flight"}) {
    EXPECT_TRUE(churn.counts().contains(kind)) << "no step did " << kind;
  }
}

}  // namespace
}  // namespace topk::server::test
