// The churn walk's valid operations (churn.h): sessions opened and ended,
// regions registered and unregistered, selects answered exactly and writing
// only their K output cells.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "churn.h"

namespace topk::server::test::churn {

using testing::Distribution;
using testing::LengthPattern;

Churn::Churn(uint64_t seed) : rng_(seed) {
  t_ = StartServer(RegionServerOptions());
  if (t_.client == nullptr) return;
  side_ = t_.NewClient();
  prefix_ = absl::StrCat("/topk-test-", getpid(), "-");  // every segment UniqueShmName names
  for (int i = 0; i < kActors; ++i) actors_.push_back(Actor{.id = i});
}

void Churn::Step() {
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

void Churn::Open(Actor& a) {
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

Dataset* Churn::NewDataset(Actor& a) {
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
std::string Churn::FreeName(Actor& a) {
  if (Coin(30)) {
    const std::string shared = absl::StrCat("shared-", Pick(0, 2));
    if (!a.regions.contains(shared)) return shared;
  }
  return absl::StrCat("a", a.id, "-r", a.names++);
}

void Churn::Register(Actor& a) {
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

std::vector<std::string> Churn::RowRegions(const Actor& a) const {
  std::vector<std::string> names;
  for (const auto& [name, reg] : a.regions) {
    if (reg.kind != RegionKind::kWindow) names.push_back(name);
  }
  return names;
}

std::vector<std::string> Churn::WholeRegionsOf(const Actor& a, const Dataset* d) const {
  std::vector<std::string> names;
  for (const auto& [name, reg] : a.regions) {
    if (reg.kind == RegionKind::kWhole && reg.data == d) names.push_back(name);
  }
  return names;
}

// Random valid rows by reference through `name` (offset 0 of `d`).
client::RegionRowsRef Churn::RowsRef(const std::string& name, const Dataset& d) {
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

std::optional<Churn::SelectTarget> Churn::PickSelectTarget(Actor& a) {
  const std::vector<std::string> sources = RowRegions(a);
  if (sources.empty()) return std::nullopt;
  SelectTarget t;
  t.name = PickOf(sources);
  t.data = a.regions[t.name].data;
  t.k = static_cast<int32_t>(Pick(1, static_cast<int>(t.data->laid.stride)));
  t.ref = RowsRef(t.name, *t.data);
  return t;
}

void Churn::Select(Actor& a) {
  const std::optional<SelectTarget> target = PickSelectTarget(a);
  if (!target) return Register(a);
  Dataset& d = *target->data;
  const int32_t k = target->k;
  const client::RegionRowsRef& ref = target->ref;
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

void Churn::Drop(Actor& a, const std::string& name) {
  --a.regions[name].data->registrations;
  a.regions.erase(name);
  a.dropped.insert(name);
}

void Churn::Unregister(Actor& a) {
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

void Churn::UnregisterAll(Actor& a) {
  Count("unregister: all");
  absl::StatusOr<int> removed = a.session->UnregisterAll();
  ASSERT_TRUE(removed.ok()) << removed.status();
  ASSERT_EQ(*removed, static_cast<int>(a.regions.size()));
  while (!a.regions.empty()) Drop(a, a.regions.begin()->first);
}

// The RegionSession destroyed (what a client's death does to its stream);
// `in_flight`: while a request of the session runs on another connection.
void Churn::EndSession(Actor& a, bool in_flight) {
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

}  // namespace topk::server::test::churn
