// The one clock request timings are measured on: the engine stamps queue and
// device time with it, the transport the total from first byte to response.
#pragma once

#include <chrono>
#include <cstdint>

namespace topk::server {

inline int64_t SteadyNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace topk::server
