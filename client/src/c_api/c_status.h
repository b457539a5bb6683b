// How the C ABI (topk/client/topk_client_c.h) hands a status across: the
// code as the return value, the message into the caller's buffer. Nothing
// may throw across the boundary, so every entry point runs inside Guarded.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace topk::client::c_api {

inline int32_t Report(const absl::Status& status, char* message, size_t message_bytes) {
  // An OK call leaves the buffer alone: the hot path writes nothing.
  if (!status.ok() && message != nullptr && message_bytes > 0) {
    const absl::string_view text = status.message();
    const size_t n = std::min(text.size(), message_bytes - 1);
    std::memcpy(message, text.data(), n);
    message[n] = '\0';
  }
  return static_cast<int32_t>(status.code());
}

// Runs `body` (returning absl::Status) and reports its status; an exception
// (an allocation that failed, typically) becomes a status instead of
// unwinding into C.
template <typename Body>
int32_t Guarded(const char* call, char* message, size_t message_bytes, Body&& body) {
  absl::Status status;
  try {
    status = std::forward<Body>(body)();
  } catch (const std::bad_alloc&) {
    status = absl::ResourceExhaustedError(absl::StrCat(call, ": out of memory"));
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat(call, ": ", e.what()));
  } catch (...) {
    status = absl::InternalError(absl::StrCat(call, ": unknown exception"));
  }
  return Report(status, message, message_bytes);
}

inline absl::Status Refused(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

}  // namespace topk::client::c_api
