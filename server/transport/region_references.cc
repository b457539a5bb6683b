// RegionService::BindSelect: a Select request's references decoded from the
// wire into the regions module's plain terms (SelectReferences), bound there
// with every byte checked, and the result handed on as the engine's
// SelectInput.
#include <optional>
#include <string>

#include "absl/types/span.h"
#include "server/transport/region_service.h"
#include "server/transport/score_dtype.h"
#include "server/transport/validate.h"

namespace topk::server {
namespace {

RegionRef ToRef(const v1::RegionRef& ref) {
  return RegionRef{.region = ref.region(), .offset = ref.offset()};
}

RowsByReference ToRows(const v1::RegionRows& rows) {
  RowsByReference out{.scores = ToRef(rows.scores()),
                      .num_rows = rows.num_rows(),
                      .lengths = absl::MakeConstSpan(rows.lengths().data(), rows.lengths_size()),
                      .width = rows.width(),
                      .dtype = ScoreTypeFromWire(rows.dtype(), "region_rows.dtype")};
  switch (rows.layout_case()) {
    case v1::RegionRows::kRowPitch:
      out.layout = RowsByReference::Layout::kRowPitch;
      out.row_pitch = rows.row_pitch();
      break;
    case v1::RegionRows::kRowOffsets:
      out.layout = RowsByReference::Layout::kRowOffsets;
      out.row_offsets = ToRef(rows.row_offsets());
      break;
    default:
      break;
  }
  if (rows.has_lengths_ref()) out.lengths_ref = ToRef(rows.lengths_ref());
  return out;
}

OutputByReference ToOutput(const v1::RegionOutput& output) {
  OutputByReference out{.indices = ToRef(output.indices()), .row_stride = output.row_stride()};
  if (output.has_values()) out.values = ToRef(output.values());
  return out;
}

}  // namespace

absl::StatusOr<SelectInput> RegionService::BindSelect(grpc::CallbackServerContext* context,
                                                      const RawSelectRequest& raw,
                                                      const RowSource* inline_rows,
                                                      RegionBinding& binding,
                                                      SessionCache* cache) const {
  if (absl::Status s = CheckAllowed(context); !s.ok()) return s;
  const v1::SelectRequest& message = raw.by_reference;
  const RequestLimits& limits = engine_->limits();
  if (message.session_id().empty()) {
    return absl::InvalidArgumentError("session_id: required when the request names regions");
  }
  if (absl::Status s = CheckK(raw.k, limits); !s.ok()) return s;
  SelectReferences refs{.session_id = message.session_id(),
                        .k = raw.k,
                        .return_values = raw.options.return_values(),
                        .wait_event = message.ordering().wait_event(),
                        .record_event = message.ordering().record_event()};
  if (message.rows_case() == v1::SelectRequest::kRegionRows) {
    refs.region_rows = ToRows(message.region_rows());
  } else if (message.rows_case() == v1::SelectRequest::kInlineRows && inline_rows != nullptr) {
    // Checked here as for a request without references; the regions module
    // reports a refusal in its turn, after the session.
    refs.inline_rows =
        CheckInlineRows(raw.k, raw.dtype, raw.num_lengths, raw.lengths, *inline_rows, limits);
  }
  if (message.has_output()) refs.output = ToOutput(message.output());
  absl::StatusOr<BoundSelect> bound = manager_.BindSelect(refs, binding, cache);
  if (!bound.ok()) return bound.status();
  return SelectInput{.k = raw.k,
                     .options = SelectOptions{.sorted = raw.options.sorted(),
                                              .deterministic = raw.options.deterministic()},
                     .return_values = raw.options.return_values(),
                     .lengths = bound->lengths,
                     .rows = bound->rows,
                     .max_length = bound->max_length,
                     .row_offsets = bound->row_offsets,
                     .device_lengths = bound->device_lengths,
                     .num_rows = bound->num_rows,
                     .output_target = bound->output_target,
                     .ordering = bound->ordering,
                     .device_ordinal = bound->device_ordinal,
                     .dtype = bound->dtype};
}

}  // namespace topk::server
