#include "server/regions/region_binding.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "server/regions/region_overlap.h"

namespace topk::server {
namespace {

using Wide = unsigned __int128;  // products of two 64-bit values cannot overflow it

// A resolved reference: the leased region, its name and the checked byte
// offset.
struct Resolved {
  const Region* region = nullptr;
  absl::string_view name;
  uint64_t offset = 0;

  // What the request touches from here on (the caller adds the rows).
  TouchedBytes Touched(absl::string_view field, uint64_t element_bytes, bool writes) const {
    return TouchedBytes{.field = field,
                        .region = name,
                        .place = region->place(),
                        .offset = offset,
                        .element_bytes = element_bytes,
                        .writes = writes};
  }
};

class Binder {
 public:
  Binder(const SessionRegions& session, RegionBinding& binding, bool cpu_backend)
      : session_(session), binding_(binding), cpu_backend_(cpu_backend) {}

  // Leases `ref`'s region, which must hold bytes (not an event), sit on the
  // request's device, and have `ref.offset` aligned to `alignment` and
  // within its range.
  absl::StatusOr<Resolved> Memory(const RegionRef& ref, absl::string_view field,
                                  uint64_t alignment) {
    absl::StatusOr<RegionLease> lease = session_.Lease(ref.region);
    if (!lease.ok()) {
      return absl::Status(lease.status().code(),
                          absl::StrCat(field, ".region: ", lease.status().message()));
    }
    const Region& region = *lease->get();
    if (region.kind() == RegionKind::kCudaEvent) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".region: '", ref.region, "' is an event, not memory"));
    }
    if (cpu_backend_ && region.device_ordinal() >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".region: '", ref.region, "' is on GPU ", region.device_ordinal(),
                       " but this server selects on the CPU (wrong device)"));
    }
    if (device_.has_value() && *device_ != region.device_ordinal()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".region: '", ref.region, "' is on ",
                       DeviceName(region.device_ordinal()), ", the request's other regions on ",
                       DeviceName(*device_), " (wrong device: one request, one device)"));
    }
    device_ = region.device_ordinal();
    if (absl::Status intact = region.CheckIntact(); !intact.ok()) {
      return absl::Status(intact.code(),
                          absl::StrCat(field, ".region: '", ref.region, "': ", intact.message()));
    }
    if (ref.offset > region.byte_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".offset: ", ref.offset, " is past the region's ", region.byte_size(), " bytes"));
    }
    const auto address = reinterpret_cast<uintptr_t>(region.data()) + ref.offset;
    if (address % alignment != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".offset: ", ref.offset, " is not ", alignment, "-byte aligned"));
    }
    binding_.leases.push_back(*std::move(lease));
    binding_.names.push_back(ref.region);
    return Resolved{.region = &region, .name = ref.region, .offset = ref.offset};
  }

  // `count` elements of `element_bytes` from `at` must fit its region.
  static absl::Status Fits(const Resolved& at, Wide count, uint64_t element_bytes,
                           absl::string_view field) {
    const Wide end = Wide{at.offset} + count * element_bytes;
    if (end > at.region->byte_size()) {
      // count < 2^127 always; past 2^64 it is shown clamped.
      const uint64_t shown = count > ~uint64_t{0} ? ~uint64_t{0} : static_cast<uint64_t>(count);
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", shown, " x ", element_bytes, " bytes from offset ", at.offset,
                       " run past the region's ", at.region->byte_size(), " bytes"));
    }
    return absl::OkStatus();
  }

  int32_t device() const { return device_.value_or(-1); }

  // The bytes each field touches, for CheckNoOverlap once all are bound.
  void Touch(const TouchedBytes& field) { touched_.push_back(field); }
  absl::Span<const TouchedBytes> touched() const { return touched_; }

  static std::string DeviceName(int32_t ordinal) {
    return ordinal < 0 ? "the host" : absl::StrCat("GPU ", ordinal);
  }

 private:
  const SessionRegions& session_;
  RegionBinding& binding_;
  bool cpu_backend_;
  std::optional<int32_t> device_;
  absl::InlinedVector<TouchedBytes, 5> touched_;
};

absl::Status CheckLength(int64_t r, int32_t length, int64_t bound, const RequestLimits& limits) {
  if (length < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("region_rows.lengths[", r, "] = ", length, " is negative (row ", r, ")"));
  }
  if (length > limits.max_width) {
    return absl::InvalidArgumentError(absl::StrCat("region_rows.lengths[", r, "] = ", length,
                                                   " exceeds max_width = ", limits.max_width,
                                                   " (row ", r, ")"));
  }
  if (bound > 0 && length > bound) {
    return absl::InvalidArgumentError(absl::StrCat("region_rows.lengths[", r, "] = ", length,
                                                   " exceeds region_rows.width = ", bound, " (row ",
                                                   r, ")"));
  }
  return absl::OkStatus();
}

// The rows: lengths (inline, or copied from a host region, or left on the
// GPU), row starts, and the extent they span, all checked, in elements of
// input.dtype.
absl::Status BindRows(const RowsByReference& rows, const RequestLimits& limits,
                      bool host_rows_read_in_place, Binder& binder, RegionBinding& binding,
                      BoundSelect& input) {
  const int64_t m = rows.num_rows;
  if (m < 1) return absl::InvalidArgumentError("region_rows.num_rows: must be >= 1");
  if (absl::Status s = CheckRowCount(m, limits); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("region_rows.num_rows: ", s.message()));
  }
  if (rows.width < 0 || rows.width > limits.max_width) {
    return absl::InvalidArgumentError(absl::StrCat("region_rows.width = ", rows.width,
                                                   " is out of range [0, ", limits.max_width,
                                                   "] (max_width)"));
  }
  const uint64_t element_bytes = ScoreTypeBytes(input.dtype);
  absl::StatusOr<Resolved> scores = binder.Memory(rows.scores, "region_rows.scores", element_bytes);
  if (!scores.ok()) return scores.status();
  const bool on_gpu = scores->region->device_ordinal() >= 0;

  // Lengths.
  const bool inline_lengths = !rows.lengths.empty();
  if (inline_lengths == rows.lengths_ref.has_value()) {
    return absl::InvalidArgumentError(
        "region_rows: give the lengths either inline (lengths) or by reference (lengths_ref)");
  }
  int64_t bound = rows.width;
  if (inline_lengths) {
    if (static_cast<int64_t>(rows.lengths.size()) != m) {
      return absl::InvalidArgumentError(absl::StrCat("region_rows.lengths: ", rows.lengths.size(),
                                                     " entries for num_rows = ", m));
    }
    binding.lengths.assign(rows.lengths.begin(), rows.lengths.end());
  } else {
    absl::StatusOr<Resolved> at = binder.Memory(*rows.lengths_ref, "region_rows.lengths_ref", 4);
    if (!at.ok()) return at.status();
    if (absl::Status s = Binder::Fits(*at, m, sizeof(int32_t), "region_rows.lengths_ref");
        !s.ok()) {
      return s;
    }
    TouchedBytes touched = at->Touched("region_rows.lengths_ref", sizeof(int32_t), false);
    touched.length = m;
    binder.Touch(touched);
    if (on_gpu) {
      if (bound == 0) {
        return absl::InvalidArgumentError(
            "region_rows.width: required when the lengths are on a GPU (the bound on every "
            "L_r; the selector refuses rows past it)");
      }
      input.device_lengths = reinterpret_cast<const int32_t*>(at->region->data() + at->offset);
    } else {
      // A private copy: the client cannot change what was checked.
      binding.lengths.resize(m);
      if (absl::Status s =
              CopyFromRegion(*at->region, at->offset, m * sizeof(int32_t), binding.lengths.data());
          !s.ok()) {
        return s;
      }
    }
  }
  int32_t longest = 0;
  for (int64_t r = 0; r < static_cast<int64_t>(binding.lengths.size()); ++r) {
    if (absl::Status s = CheckLength(r, binding.lengths[r], bound, limits); !s.ok()) return s;
    longest = std::max(longest, binding.lengths[r]);
  }
  if (input.device_lengths == nullptr && bound == 0) bound = longest;
  // Row r's reads end at start_r + bound_r elements.
  const auto row_bound = [&](int64_t r) -> int64_t {
    return input.device_lengths != nullptr ? bound : binding.lengths[r];
  };

  // Row starts.
  const uint64_t available = (scores->region->byte_size() - scores->offset) / element_bytes;
  binding.row_offsets.resize(m);
  switch (rows.layout) {
    case RowsByReference::Layout::kRowPitch: {
      const int64_t pitch = rows.row_pitch;
      if (pitch < 1 || pitch < bound) {
        return absl::InvalidArgumentError(absl::StrCat("region_rows.row_pitch = ", pitch,
                                                       " is below the longest row (", bound, ")"));
      }
      for (int64_t r = 0; r < m; ++r) {
        const Wide end = Wide{static_cast<uint64_t>(r)} * static_cast<uint64_t>(pitch) +
                         static_cast<uint64_t>(row_bound(r));
        if (end > available) {
          return absl::InvalidArgumentError(absl::StrCat(
              "region_rows: row ", r, " (", r, " x row_pitch ", pitch, " + ", row_bound(r),
              " elements) runs past the region's ", available, " elements after scores.offset"));
        }
        binding.row_offsets[r] = r * pitch;
      }
      break;
    }
    case RowsByReference::Layout::kRowOffsets: {
      absl::StatusOr<Resolved> at = binder.Memory(rows.row_offsets, "region_rows.row_offsets", 8);
      if (!at.ok()) return at.status();
      if (absl::Status s = Binder::Fits(*at, m, sizeof(int64_t), "region_rows.row_offsets");
          !s.ok()) {
        return s;
      }
      TouchedBytes touched = at->Touched("region_rows.row_offsets", sizeof(int64_t), false);
      touched.length = m;
      binder.Touch(touched);
      if (absl::Status s = CopyFromRegion(*at->region, at->offset, m * sizeof(int64_t),
                                          binding.row_offsets.data());
          !s.ok()) {
        return s;
      }
      for (int64_t r = 0; r < m; ++r) {
        const int64_t start = binding.row_offsets[r];
        if (start < 0 ||
            Wide{static_cast<uint64_t>(start)} + static_cast<uint64_t>(row_bound(r)) > available) {
          return absl::InvalidArgumentError(absl::StrCat(
              "region_rows.row_offsets[", r, "] = ", start, " (+ ", row_bound(r),
              " elements) is outside the region's ", available, " elements after scores.offset"));
        }
      }
      break;
    }
    default:
      return absl::InvalidArgumentError("region_rows: set row_pitch or row_offsets");
  }
  int64_t extent = 0;
  for (int64_t r = 0; r < m; ++r) extent = std::max(extent, binding.row_offsets[r] + row_bound(r));
  // Row r reads [start_r, start_r + bound_r): L_r where the host knows it.
  TouchedBytes touched = scores->Touched("region_rows.scores", element_bytes, false);
  touched.rows = m;
  touched.starts = binding.row_offsets;
  if (input.device_lengths != nullptr) {
    touched.length = bound;
  } else {
    touched.lengths = binding.lengths;
  }
  binder.Touch(touched);
  binding.rows.emplace(scores->region->data() + scores->offset,
                       static_cast<size_t>(extent) * element_bytes,
                       scores->region->device_ordinal());
  // Only rows the backend copies count against max_batch_bytes.
  if (absl::Status s = CheckRegionRowBytes(*binding.rows, host_rows_read_in_place, limits);
      !s.ok()) {
    return s;
  }
  input.rows = &*binding.rows;
  input.lengths = binding.lengths;
  input.row_offsets = binding.row_offsets;
  input.num_rows = m;
  input.max_length = static_cast<int32_t>(bound);
  return absl::OkStatus();
}

// Values are elements of the rows' type: `value_bytes` each.
absl::Status BindOutput(const OutputByReference& output, int64_t m, int32_t k, bool return_values,
                        uint64_t value_bytes, Binder& binder, OutputTarget& target) {
  const int64_t stride = output.row_stride == 0 ? k : output.row_stride;
  if (stride < k) {
    return absl::InvalidArgumentError(
        absl::StrCat("output.row_stride = ", output.row_stride, " is below k = ", k));
  }
  // Rows 0..m-2 take `stride` elements, the last one k (in 128 bits: the
  // product of two 64-bit values would wrap in 64).
  const Wide elements =
      Wide{static_cast<uint64_t>(m - 1)} * static_cast<uint64_t>(stride) + static_cast<uint64_t>(k);
  absl::StatusOr<Resolved> indices = binder.Memory(output.indices, "output.indices", 4);
  if (!indices.ok()) return indices.status();
  if (absl::Status s = Binder::Fits(*indices, elements, sizeof(int32_t), "output.indices");
      !s.ok()) {
    return s;
  }
  // Each row writes its first k elements (-1 filled), never the rest.
  TouchedBytes touched = indices->Touched("output.indices", sizeof(int32_t), true);
  touched.rows = m;
  touched.stride = stride;
  touched.length = k;
  binder.Touch(touched);
  target.indices = reinterpret_cast<int32_t*>(indices->region->data() + indices->offset);
  target.row_stride = stride;
  target.device_ordinal = indices->region->device_ordinal();
  if (output.values.has_value() != return_values) {
    return absl::InvalidArgumentError(
        "output.values: required exactly when options.return_values is set");
  }
  if (return_values) {
    absl::StatusOr<Resolved> values = binder.Memory(*output.values, "output.values", value_bytes);
    if (!values.ok()) return values.status();
    if (absl::Status s = Binder::Fits(*values, elements, value_bytes, "output.values"); !s.ok()) {
      return s;
    }
    touched = values->Touched("output.values", value_bytes, true);
    touched.rows = m;
    touched.stride = stride;
    touched.length = k;
    binder.Touch(touched);
    target.values = values->region->data() + values->offset;
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> BindEvent(const SessionRegions& session, absl::string_view name,
                                absl::string_view field, int32_t device, RegionBinding& binding) {
  absl::StatusOr<RegionLease> lease = session.Lease(name);
  if (!lease.ok()) {
    return absl::Status(lease.status().code(), absl::StrCat(field, ": ", lease.status().message()));
  }
  if ((*lease)->kind() != RegionKind::kCudaEvent) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": '", name, "' is not a cuda_event"));
  }
  if ((*lease)->device_ordinal() != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", name, "' is on GPU ", (*lease)->device_ordinal(),
                     ", the request's regions on ", Binder::DeviceName(device), " (wrong device)"));
  }
  void* event = (*lease)->cuda_event();
  binding.leases.push_back(*std::move(lease));
  binding.names.push_back(name);
  return event;
}

}  // namespace

absl::Status CheckNoFaults(const RegionBinding& binding) {
  for (size_t i = 0; i < binding.leases.size(); ++i) {
    if (binding.leases[i]->poisoned()) {
      return absl::DataLossError(absl::StrCat(
          "region '", binding.names[i],
          "': the shared-memory object shrank while the server read or wrote it; the request "
          "is void and the region is poisoned (unregister it)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRegionRowBytes(const RowSource& rows, bool host_rows_read_in_place,
                                 const RequestLimits& limits) {
  const bool in_place = rows.device_ordinal() >= 0 ||
                        (host_rows_read_in_place && rows.InPlaceHostFloats() != nullptr);
  if (!in_place && rows.size_bytes() > static_cast<uint64_t>(limits.max_batch_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region_rows: the rows span ", rows.size_bytes(),
        " bytes, over max_batch_bytes = ", limits.max_batch_bytes,
        host_rows_read_in_place ? " (rows not 4-byte aligned are copied into the staging)"
                                : " (this backend copies host rows into its staging)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BoundSelect> BindReferences(const SessionRegions& session,
                                           const SelectReferences& refs, const BindingRules& rules,
                                           RegionBinding& binding) {
  BoundSelect input;
  Binder binder(session, binding, rules.cpu_backend);
  if (refs.region_rows.has_value()) {
    if (!refs.region_rows->dtype.ok()) return refs.region_rows->dtype.status();
    input.dtype = *refs.region_rows->dtype;
    if (absl::Status s = BindRows(*refs.region_rows, rules.limits, rules.host_rows_read_in_place,
                                  binder, binding, input);
        !s.ok()) {
      return s;
    }
  } else if (refs.inline_rows.has_value()) {
    if (!refs.inline_rows->ok()) return refs.inline_rows->status();
    const InlineRows& rows = **refs.inline_rows;
    input.dtype = rows.dtype;
    input.lengths = rows.lengths;
    input.rows = rows.rows;
    input.num_rows = static_cast<int64_t>(rows.lengths.size());
    input.max_length = rows.max_length;
  } else {
    return absl::InvalidArgumentError("rows: no rows given (set inline_rows or region_rows)");
  }
  if (refs.output.has_value()) {
    if (absl::Status s = BindOutput(*refs.output, input.num_rows, refs.k, refs.return_values,
                                    ScoreTypeBytes(input.dtype), binder, binding.output);
        !s.ok()) {
      return s;
    }
    input.output_target = &binding.output;
    // Once, with every field bound: nothing is written where it is read.
    if (absl::Status s = CheckNoOverlap(binder.touched()); !s.ok()) return s;
  }
  const int32_t device = binder.device();
  if (!refs.wait_event.empty() || !refs.record_event.empty()) {
    if (device < 0) {
      return absl::InvalidArgumentError(
          "ordering: CUDA events order GPU regions; this request's regions are on the host");
    }
    if (!refs.wait_event.empty()) {
      absl::StatusOr<void*> event =
          BindEvent(session, refs.wait_event, "ordering.wait_event", device, binding);
      if (!event.ok()) return event.status();
      input.ordering.wait = *event;
    }
    if (!refs.record_event.empty()) {
      absl::StatusOr<void*> event =
          BindEvent(session, refs.record_event, "ordering.record_event", device, binding);
      if (!event.ok()) return event.status();
      input.ordering.record = *event;
    }
  }
  input.device_ordinal = device;
  return input;
}

}  // namespace topk::server
