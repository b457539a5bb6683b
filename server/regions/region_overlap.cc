#include "server/regions/region_overlap.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace topk::server {
namespace {

// Bytes [begin, end) of the field's memory (MemoryPlace coordinates).
struct Run {
  uint64_t begin = 0;
  uint64_t end = 0;
  int64_t row = 0;
};

int64_t RowStart(const TouchedBytes& f, int64_t r) {
  return f.starts.empty() ? r * f.stride : f.starts[r];
}

int64_t RowLength(const TouchedBytes& f, int64_t r) {
  return f.lengths.empty() ? f.length : f.lengths[r];
}

Run RowRun(const TouchedBytes& f, int64_t r) {
  const uint64_t begin =
      f.place.start + f.offset + static_cast<uint64_t>(RowStart(f, r)) * f.element_bytes;
  return Run{.begin = begin,
             .end = begin + static_cast<uint64_t>(RowLength(f, r)) * f.element_bytes,
             .row = r};
}

// The lowest and highest byte the field touches; begin == end when none.
Run Hull(const TouchedBytes& f) {
  Run hull{.begin = std::numeric_limits<uint64_t>::max(), .end = 0};
  for (int64_t r = 0; r < f.rows; ++r) {
    if (RowLength(f, r) == 0) continue;
    const Run run = RowRun(f, r);
    hull.begin = std::min(hull.begin, run.begin);
    hull.end = std::max(hull.end, run.end);
  }
  if (hull.end == 0) hull.begin = 0;
  return hull;
}

// A field's non-empty rows in address order: as they come when their starts
// never decrease (pitched rows, strided outputs), else sorted once.
class RowsInOrder {
 public:
  explicit RowsInOrder(const TouchedBytes& f) : f_(f) {
    bool sorted = true;
    for (int64_t r = 1; r < f.rows && sorted; ++r) sorted = RowStart(f, r - 1) <= RowStart(f, r);
    if (!sorted) {
      order_.resize(f.rows);
      std::iota(order_.begin(), order_.end(), int64_t{0});
      std::stable_sort(order_.begin(), order_.end(),
                       [&f](int64_t a, int64_t b) { return RowStart(f, a) < RowStart(f, b); });
    }
    Skip();
  }
  bool done() const { return next_ >= f_.rows; }
  Run peek() const { return RowRun(f_, Row(next_)); }
  void Advance() {
    ++next_;
    Skip();
  }

 private:
  int64_t Row(int64_t i) const { return order_.empty() ? i : order_[i]; }
  void Skip() {
    while (next_ < f_.rows && RowLength(f_, Row(next_)) == 0) ++next_;
  }
  const TouchedBytes& f_;
  std::vector<int64_t> order_;
  int64_t next_ = 0;
};

// A pair of rows that share bytes, one of `a`'s and one of `b`'s; or none.
struct Shared {
  bool found = false;
  Run a;
  Run b;
};

// One pass over both fields' rows in address order, keeping each field's
// furthest end so far: a row that begins before the other field's furthest
// end overlaps the row that reached it.
Shared FirstShared(const TouchedBytes& a, const TouchedBytes& b) {
  RowsInOrder sides[2] = {RowsInOrder(a), RowsInOrder(b)};
  Run furthest[2];  // end == 0: none yet
  while (!sides[0].done() || !sides[1].done()) {
    const int s =
        sides[1].done() || (!sides[0].done() && sides[0].peek().begin <= sides[1].peek().begin) ? 0
                                                                                                : 1;
    const Run run = sides[s].peek();
    sides[s].Advance();
    if (furthest[1 - s].end > run.begin) {
      return s == 0 ? Shared{.found = true, .a = run, .b = furthest[1]}
                    : Shared{.found = true, .a = furthest[0], .b = run};
    }
    if (run.end > furthest[s].end) furthest[s] = run;
  }
  return {};
}

std::string RowOf(const TouchedBytes& f, const Run& run) {
  return f.rows > 1 ? absl::StrCat("row ", run.row, " of ", f.field) : std::string(f.field);
}

absl::Status Refuse(const TouchedBytes& writer, const TouchedBytes& other, const Shared& shared) {
  // The shared bytes, in the writer's region's offsets.
  const uint64_t from = std::max(shared.a.begin, shared.b.begin) - writer.place.start;
  const uint64_t to = std::min(shared.a.end, shared.b.end) - writer.place.start;
  const std::string where = writer.region == other.region
                                ? absl::StrCat("in region '", writer.region, "'")
                                : absl::StrCat("in region '", writer.region, "' (region '",
                                               other.region, "' maps the same memory)");
  return absl::InvalidArgumentError(absl::StrCat(
      writer.field, " overlaps ", other.field, " ", where, ": ", RowOf(writer, shared.a), " and ",
      RowOf(other, shared.b), " share bytes [", from, ", ", to,
      ") of the region (no request may write where it reads or writes another field)"));
}

}  // namespace

absl::Status CheckNoOverlap(absl::Span<const TouchedBytes> fields) {
  absl::InlinedVector<Run, 5> hulls;
  for (const TouchedBytes& f : fields) hulls.push_back(Hull(f));
  for (size_t i = 0; i < fields.size(); ++i) {
    for (size_t j = i + 1; j < fields.size(); ++j) {
      if (!fields[i].writes && !fields[j].writes) continue;  // reads may share bytes
      if (!fields[i].place.SameObject(fields[j].place)) continue;
      // The writer first in the message.
      const Run& hi = hulls[i];
      const Run& hj = hulls[j];
      if (hi.begin >= hj.end || hj.begin >= hi.end) continue;  // also when either is empty
      const TouchedBytes& a = fields[i].writes ? fields[i] : fields[j];
      const TouchedBytes& b = fields[i].writes ? fields[j] : fields[i];
      if (const Shared shared = FirstShared(a, b); shared.found) return Refuse(a, b, shared);
    }
  }
  return absl::OkStatus();
}

}  // namespace topk::server
