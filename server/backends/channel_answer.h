// How an executor answers a channel call in its control block: the status
// fields first, then done = 1 with release order, so a client that sees
// done also sees the status of the same call (and, for OK, the outputs).
#pragma once

#include <atomic>
#include <cstdint>

#include "topk/channel/control_block.h"
#include "topk/contract.h"

namespace topk::server {

inline void AnswerChannelCall(topk_channel_control& control, uint32_t status, int32_t row,
                              int64_t value) {
  control.status = status;
  control.status_row = row;
  control.status_value = value;
  std::atomic_thread_fence(std::memory_order_release);
  control.done = 1;
}

// The status word of a row status (kOk: TOPK_CHANNEL_OK).
inline uint32_t ChannelStatusOf(RowStatus status) {
  switch (status) {
    case RowStatus::kOk:
      return TOPK_CHANNEL_OK;
    case RowStatus::kNan:
      return TOPK_CHANNEL_NAN;
    case RowStatus::kBadLength:
      return TOPK_CHANNEL_BAD_LENGTH;
  }
  return TOPK_CHANNEL_DEVICE_ERROR;
}

}  // namespace topk::server
