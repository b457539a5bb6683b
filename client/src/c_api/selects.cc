// The C ABI's selects (topk/client/topk_client_c.h): by reference on a
// session (the SelectPipeline stream, or unary), and inline on a client.
// Arguments are checked here only as far as building the request needs;
// everything about the rows themselves (k, lengths against the width, the
// regions' extents) is the server's to check, so both paths of the Python
// client get the server's one wording.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "c_status.h"
#include "gathered_select.h"
#include "handles.h"
#include "topk/client/topk_client_c.h"

namespace {

using topk::client::CallOptions;
using topk::client::RegionSlice;
using topk::client::SelectResult;
using topk::client::c_api::Guarded;
using topk::client::c_api::Refused;
namespace v1 = topk::v1;

constexpr uint32_t kKnownOptions =
    TOPK_RPC_SORTED | TOPK_RPC_DETERMINISTIC | TOPK_RPC_RETURN_VALUES;

absl::Status CheckCommon(int32_t num_rows, uint32_t options, int32_t dtype) {
  if (num_rows < 0) return Refused("request.num_rows", absl::StrCat(num_rows, " (>= 0)"));
  if ((options & ~kKnownOptions) != 0) {
    return Refused("request.options",
                   absl::StrCat("unknown bits 0x", absl::Hex(options & ~kKnownOptions)));
  }
  if (dtype != TOPK_RPC_FP32 && dtype != TOPK_RPC_BF16 && dtype != TOPK_RPC_FP16) {
    return Refused("request.dtype",
                   absl::StrCat(dtype, " is not a score type (0 FP32, 1 BF16, 2 FP16)"));
  }
  return absl::OkStatus();
}

// A reply's answer goes into the caller's buffers: they must exist before
// the call is made (a refusal afterwards would waste the server's work).
absl::Status CheckAnswerBuffers(const topk_rpc_answer* answer, bool values) {
  if (answer == nullptr || answer->indices == nullptr) {
    return Refused("answer.indices", "NULL, but the answer comes back in the reply");
  }
  if (values && answer->values == nullptr) {
    return Refused("answer.values", "NULL, but values were asked for");
  }
  return absl::OkStatus();
}

CallOptions Options(uint32_t bits, bool values, const char* request_id, int64_t timeout_us) {
  CallOptions options;
  options.sorted = (bits & TOPK_RPC_SORTED) != 0;
  options.deterministic = (bits & TOPK_RPC_DETERMINISTIC) != 0;
  options.return_values = values;
  if (request_id != nullptr) options.request_id = request_id;
  if (timeout_us > 0) options.timeout = absl::Microseconds(timeout_us);
  return options;
}

void FillShape(const SelectResult& result, topk_rpc_answer* answer) {
  if (answer == nullptr) return;
  answer->num_rows = result.num_rows;
  answer->k = result.k;
  answer->timings = {.queue_us = result.server.queue_us,
                     .device_us = result.server.device_us,
                     .total_us = result.server.total_us,
                     .prepare_us = result.server.prepare_us,
                     .client_us = result.client_us,
                     .batch_requests = result.server.batch_requests};
}

// Copies an answer that came back in the reply; the buffers were checked.
absl::Status CopyAnswer(const SelectResult& result, topk_rpc_answer* answer) {
  const int64_t count = result.num_rows * result.k;
  if (count > answer->capacity) {
    return absl::OutOfRangeError(absl::StrCat("answer.capacity: ", answer->capacity,
                                              " elements for the reply's ", result.num_rows, " x ",
                                              result.k));
  }
  std::memcpy(answer->indices, result.indices.data(), result.indices.size() * sizeof(int32_t));
  if (answer->values != nullptr) {
    if (!result.values.empty()) {
      std::memcpy(answer->values, result.values.data(), result.values.size() * sizeof(float));
    } else {
      std::memcpy(answer->values, result.values16.data(),
                  result.values16.size() * sizeof(uint16_t));
    }
  }
  FillShape(result, answer);
  return absl::OkStatus();
}

std::optional<RegionSlice> Slice(const topk_rpc_ref& ref) {
  if (ref.region == nullptr) return std::nullopt;
  return RegionSlice{.region = ref.region, .offset = ref.offset};
}

absl::Status SelectRef(topk::client::RegionSession& session, const topk_rpc_ref_select& request,
                       topk_rpc_answer* answer) {
  if (auto s = CheckCommon(request.num_rows, request.options, request.dtype); !s.ok()) return s;
  if (request.scores.region == nullptr) return Refused("request.scores.region", "NULL");
  if (request.lengths == nullptr && request.num_lengths != 0) {
    return Refused("request.lengths", absl::StrCat("NULL with num_lengths ", request.num_lengths));
  }
  if (request.num_lengths < 0) {
    return Refused("request.num_lengths", absl::StrCat(request.num_lengths, " (>= 0)"));
  }
  const bool by_reference = request.out_indices.region != nullptr;
  if (!by_reference && request.out_values.region != nullptr) {
    return Refused("request.out_values", "given without request.out_indices");
  }
  const bool values =
      request.out_values.region != nullptr || (request.options & TOPK_RPC_RETURN_VALUES) != 0;
  if (!by_reference) {
    if (auto s = CheckAnswerBuffers(answer, values); !s.ok()) return s;
  }
  topk::client::RegionRowsRef rows{.scores = *Slice(request.scores),
                                   .num_rows = request.num_rows,
                                   .row_pitch = request.row_pitch,
                                   .lengths_ref = Slice(request.lengths_ref),
                                   .width = request.width,
                                   .dtype = static_cast<v1::ScoreType>(request.dtype)};
  // The count as given: a wrong one is the server's to refuse, in its words.
  if (request.num_lengths > 0) {
    rows.lengths.assign(request.lengths, request.lengths + request.num_lengths);
  }
  std::optional<topk::client::RegionOutputRef> output;
  if (by_reference) {
    output = topk::client::RegionOutputRef{.indices = *Slice(request.out_indices),
                                           .values = Slice(request.out_values),
                                           .row_stride = request.out_row_stride};
  }
  std::optional<topk::client::GpuOrderingRef> ordering;
  if (request.wait_event != nullptr || request.record_event != nullptr) {
    ordering = topk::client::GpuOrderingRef{
        .wait_event = request.wait_event != nullptr ? request.wait_event : "",
        .record_event = request.record_event != nullptr ? request.record_event : ""};
  }
  const CallOptions options = Options(request.options, values, request.request_id, 0);
  absl::StatusOr<SelectResult> result = session.Select(request.k, rows, output ? &*output : nullptr,
                                                       options, ordering ? &*ordering : nullptr);
  if (!result.ok()) return result.status();
  if (by_reference) {
    FillShape(*result, answer);
    return absl::OkStatus();
  }
  return CopyAnswer(*result, answer);
}

// The rows as the gathered call sends them, after the checks a C caller's
// pointers need (the rest is the server's to check).
absl::Status CheckInlineRows(const topk_rpc_inline_select& call) {
  for (int32_t r = 0; r < call.num_rows; ++r) {
    const int32_t length = call.lengths[r];
    if (length < 0) {
      return Refused(absl::StrCat("request.lengths[", r, "]"), absl::StrCat(length, " (>= 0)"));
    }
    if (length > 0 && call.rows[r] == nullptr) {
      return Refused(absl::StrCat("request.rows[", r, "]"),
                     absl::StrCat("NULL for a row of ", length, " elements"));
    }
  }
  return absl::OkStatus();
}

absl::Status SelectInline(topk_rpc_client& client, const topk_rpc_inline_select& call,
                          topk_rpc_answer* answer) {
  if (auto s = CheckCommon(call.num_rows, call.options, call.dtype); !s.ok()) return s;
  if (call.num_rows > 0 && call.rows == nullptr) return Refused("request.rows", "NULL");
  if (call.num_rows > 0 && call.lengths == nullptr) return Refused("request.lengths", "NULL");
  const bool values = (call.options & TOPK_RPC_RETURN_VALUES) != 0;
  if (auto s = CheckAnswerBuffers(answer, values); !s.ok()) return s;
  if (auto s = CheckInlineRows(call); !s.ok()) return s;
  const size_t rows = static_cast<size_t>(call.num_rows);
  const topk::client::c_api::GatheredRows gathered{
      .rows = absl::MakeSpan(call.rows, rows),
      .lengths = absl::MakeSpan(call.lengths, rows),
      .element_bytes = call.dtype == TOPK_RPC_FP32 ? sizeof(float) : sizeof(uint16_t),
      .dtype = static_cast<v1::ScoreType>(call.dtype)};
  absl::StatusOr<SelectResult> result = topk::client::c_api::SelectGathered(
      *client.generic, call.k, gathered,
      Options(call.options, values, call.request_id, call.timeout_us));
  if (!result.ok()) return result.status();
  return CopyAnswer(*result, answer);
}

}  // namespace

extern "C" {

int32_t topk_rpc_select_ref(topk_rpc_session* session, const topk_rpc_ref_select* request,
                            topk_rpc_answer* answer, char* message, size_t message_bytes) {
  return Guarded("topk_rpc_select_ref", message, message_bytes, [&]() -> absl::Status {
    if (session == nullptr) return Refused("session", "NULL");
    if (request == nullptr) return Refused("request", "NULL");
    return SelectRef(*session->session, *request, answer);
  });
}

int32_t topk_rpc_select_inline(topk_rpc_client* client, const topk_rpc_inline_select* request,
                               topk_rpc_answer* answer, char* message, size_t message_bytes) {
  return Guarded("topk_rpc_select_inline", message, message_bytes, [&]() -> absl::Status {
    if (client == nullptr) return Refused("client", "NULL");
    if (request == nullptr) return Refused("request", "NULL");
    return SelectInline(*client, *request, answer);
  });
}

}  // extern "C"
