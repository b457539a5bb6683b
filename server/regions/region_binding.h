// A Select request's references bound to leased regions of its session, and
// every byte the request will read or write checked on the host (the region
// exists in the session, holds memory on the request's one device; every
// offset in range and aligned; every row and the output inside their
// regions, in 128-bit arithmetic; nothing written where it is read) before
// the engine sees it. The one place a binding is checked, once per request.
//
// The request arrives here as plain structs, decoded from the wire by the
// transport; names point into the request's message, which outlives the
// binding.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/backends/backend.h"
#include "server/backends/row_source.h"
#include "server/regions/region.h"
#include "server/regions/region_registry.h"
#include "topk/contract.h"

namespace topk::server {

// A place in a region, as a request names it (topk.v1.RegionRef).
struct RegionRef {
  absl::string_view region;
  uint64_t offset = 0;
};

// SelectRequest.region_rows: the rows in a region.
struct RowsByReference {
  enum class Layout { kUnset, kRowPitch, kRowOffsets };
  RegionRef scores;
  int64_t num_rows = 0;
  Layout layout = Layout::kUnset;
  int64_t row_pitch = 0;
  RegionRef row_offsets;
  absl::Span<const int32_t> lengths;  // inline; empty when by reference
  std::optional<RegionRef> lengths_ref;
  int64_t width = 0;
  // region_rows.dtype as the transport mapped it from the wire; a value that
  // is no ScoreType is refused where the rows are bound, after the session.
  absl::StatusOr<ScoreType> dtype = ScoreType::kFloat32;
};

// SelectRequest.output: where the answer goes.
struct OutputByReference {
  RegionRef indices;
  std::optional<RegionRef> values;
  int64_t row_stride = 0;  // 0: k
};

// Rows sent inline with an output by reference, already checked (the
// transport's ValidateSelect).
struct InlineRows {
  const RowSource* rows = nullptr;
  absl::Span<const int32_t> lengths;
  int32_t max_length = 0;
  ScoreType dtype = ScoreType::kFloat32;
};

// What a Select request names by reference. The transport checked k and
// that a session is named.
struct SelectReferences {
  absl::string_view session_id;
  int32_t k = 0;
  bool return_values = false;
  // The rows: by reference, or inline (with why they were refused, reported
  // after the session, as the rows are bound); neither: refused.
  std::optional<RowsByReference> region_rows;
  std::optional<absl::StatusOr<InlineRows>> inline_rows;
  std::optional<OutputByReference> output;
  absl::string_view wait_event;    // "": none
  absl::string_view record_event;  // "": none
};

// How requests are bound on this server.
struct BindingRules {
  RequestLimits limits;
  // The server selects on the CPU: no GPU region can be served.
  bool cpu_backend = false;
  // Engine::reads_host_rows_in_place() (see CheckRegionRowBytes).
  bool host_rows_read_in_place = false;
};

// What a Select by reference holds while it runs: leases on its regions
// (so unregistering them waits), and the host copies of its lengths and
// row offsets (so the client cannot change them after they were checked).
//
// Inline capacity for the common request (rows, output, a few events; up to
// 64 rows) so that binding one allocates nothing.
struct RegionBinding {
  absl::InlinedVector<RegionLease, 6> leases;
  // leases[i]'s name, in the request's message (which outlives the binding).
  absl::InlinedVector<absl::string_view, 6> names;
  std::optional<RegionRows> rows;
  absl::InlinedVector<int32_t, 64> lengths;
  absl::InlinedVector<int64_t, 64> row_offsets;
  OutputTarget output;
};

// The bound request as the engine's SelectInput takes it; points into the
// RegionBinding and the request.
struct BoundSelect {
  ScoreType dtype = ScoreType::kFloat32;
  const RowSource* rows = nullptr;
  absl::Span<const int32_t> lengths;
  absl::Span<const int64_t> row_offsets;
  const int32_t* device_lengths = nullptr;
  int64_t num_rows = 0;
  int32_t max_length = 0;
  const OutputTarget* output_target = nullptr;
  GpuOrderingEvents ordering;
  int32_t device_ordinal = -1;  // the one device of the request's regions; -1: none
};

// Binds `refs` to `session`'s regions into `binding`, checking every byte
// the request touches. INVALID_ARGUMENT naming the field (and the row) at
// fault; the leasing errors as the session gives them, prefixed with the
// field.
absl::StatusOr<BoundSelect> BindReferences(const SessionRegions& session,
                                           const SelectReferences& refs, const BindingRules& rules,
                                           RegionBinding& binding);

// Rows by reference (`rows`, their span in the client's region) against
// max_batch_bytes: only rows the server copies count, since they would
// overflow the staging it sizes; rows read where they are cost the server no
// memory, so no byte limit applies to them (max_rows and max_width still
// do). Read in place: rows on a GPU, and host rows that are aligned floats
// when the backend reads host rows in place (`host_rows_read_in_place`:
// Engine::reads_host_rows_in_place(), the CPU backend; StageOnHost copies
// the others). The one place this is decided.
absl::Status CheckRegionRowBytes(const RowSource& rows, bool host_rows_read_in_place,
                                 const RequestLimits& limits);

// After the request's reads and writes: DATA_LOSS naming the region when
// one of them faulted (its memory shrank under the server; what the request
// read from it may be zeros, what it wrote is lost).
absl::Status CheckNoFaults(const RegionBinding& binding);

}  // namespace topk::server
