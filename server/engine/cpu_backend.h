// The CPU backend: topk::CpuSelector reading the request's bytes in place.
#pragma once

#include <memory>

#include "server/engine/backend.h"

namespace topk::server {

// `threads_per_worker` threads serve each worker's selections (0: the
// hardware concurrency divided by `workers`, at least 1).
std::unique_ptr<Device> MakeCpuDevice(int threads_per_worker, int workers);

}  // namespace topk::server
