#include "server/transport/select_common.h"

#include "absl/strings/str_cat.h"
#include "server/engine/clock.h"
#include "server/transport/score_dtype.h"
#include "server/transport/validate.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

SelectOptions ToOptions(const v1::SelectOptions& options) {
  return SelectOptions{.sorted = options.sorted(), .deterministic = options.deterministic()};
}

}  // namespace

void Record(const SelectContext& select, const Outcome& outcome) {
  if (outcome.code != absl::StatusCode::kOk) {
    select.metrics->OnError(outcome.code);
    return;
  }
  select.metrics->OnSuccess(outcome.rows, outcome.bytes_out, outcome.prepare_us,
                            outcome.timings.queue_us, outcome.timings.device_us, outcome.total_us);
}

grpc::Status Fail(const SelectContext& select, const absl::Status& status,
                  const std::string& request_id, Outcome& outcome) {
  spdlog::debug("select{} failed: {}", request_id.empty() ? "" : " " + request_id,
                status.ToString());
  outcome.code = status.code();
  if (absl::IsUnavailable(status) && !select.engine->usable() && select.on_no_usable_device) {
    select.on_no_usable_device();
  }
  return ToGrpcStatus(status);
}

grpc::Status FinishSelect(const SelectContext& select, const absl::Status& status,
                          const SelectOutput& output, const SelectInput& input, int64_t start_us,
                          int64_t submitted_us, const std::string& request_id,
                          v1::SelectResponse& response, Outcome& outcome) {
  if (!status.ok()) return Fail(select, status, request_id, outcome);
  const int64_t rows = RowCount(input);
  const int64_t bytes_out =
      EncodeResponse(output, input.k, rows, SteadyNowUs() - start_us, response);
  response.set_request_id(request_id);
  response.mutable_timings()->set_prepare_us(submitted_us - start_us);
  if (input.return_values) response.set_values_dtype(ScoreTypeToWire(input.dtype));
  const auto size = static_cast<int64_t>(response.ByteSizeLong());
  if (select.max_send_message_bytes > 0 && size > select.max_send_message_bytes) {
    response.Clear();
    return Fail(select,
                absl::ResourceExhaustedError(absl::StrCat(
                    "response: ", size, " bytes (", rows, " rows x k = ", input.k,
                    input.return_values
                        ? absl::StrCat(" x ", 4 + ScoreTypeBytes(input.dtype), " with values")
                        : std::string(" x 4"),
                    ") exceed --max_send_message_bytes = ", select.max_send_message_bytes,
                    "; send fewer rows per request or a smaller k")),
                request_id, outcome);
  }
  outcome = Outcome{.rows = rows,
                    .bytes_out = bytes_out,
                    .timings = output.timings,
                    .total_us = response.timings().total_us(),
                    .prepare_us = response.timings().prepare_us()};
  spdlog::debug("select{} ok: {} rows, k = {}, {} us (queue {}, device {})",
                request_id.empty() ? "" : " " + request_id, rows, input.k, outcome.total_us,
                output.timings.queue_us, output.timings.device_us);
  return grpc::Status::OK;
}

absl::Status PrepareSelect(const SelectContext& select, grpc::CallbackServerContext* context,
                           const grpc::ByteBuffer* request, PreparedSelect& out,
                           SessionCache* sessions) {
  const RequestLimits& limits = select.engine->limits();
  RawSelectRequest& raw = out.raw;
  // The decoder stores at most max_rows + 1 lengths: enough to refuse.
  absl::Status parsed = ParseRawSelect(*request, static_cast<size_t>(limits.max_rows), raw);
  select.metrics->OnBytesIn(raw.scores_size);
  if (!parsed.ok()) return parsed;
  if (raw.has_inline_rows) out.rows.emplace(request, raw.scores_offset, raw.scores_size);
  if (raw.references_regions) {
    // Rows, lengths or output in regions: bound (and checked) by the region
    // service; the request then holds leases on them until it is done.
    absl::StatusOr<SelectInput> input = select.regions->BindSelect(
        context, raw, out.rows.has_value() ? &*out.rows : nullptr, out.regions, sessions);
    if (!input.ok()) return input.status();
    out.input = *input;
    return absl::OkStatus();
  }
  if (!raw.has_inline_rows) {
    return absl::InvalidArgumentError("rows: no rows given (set inline_rows)");
  }
  absl::StatusOr<InlineRows> rows =
      CheckInlineRows(raw.k, raw.dtype, raw.num_lengths, raw.lengths, *out.rows, limits);
  if (!rows.ok()) return rows.status();
  // The scores stay in gRPC's receive buffer; the backend copies them once.
  out.input = SelectInput{.k = raw.k,
                          .options = ToOptions(raw.options),
                          .return_values = raw.options.return_values(),
                          .lengths = rows->lengths,
                          .rows = rows->rows,
                          .max_length = rows->max_length,
                          .dtype = rows->dtype};
  return absl::OkStatus();
}

absl::Status ClientGone() {
  return absl::CancelledError(
      "the client cancelled the call or its deadline passed before the request arrived");
}

}  // namespace topk::server
