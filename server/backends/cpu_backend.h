// The CPU backend: topk::CpuSelector reading the request's floats in place
// when their source holds them contiguous, else from one copy in the worker's
// staging.
#pragma once

#include <memory>

#include "server/backends/backend.h"

namespace topk::server {

// `threads_per_worker` threads serve each worker's selections (0: the
// hardware concurrency divided by `workers`, at least 1).
std::unique_ptr<Device> MakeCpuDevice(int threads_per_worker, int workers);

}  // namespace topk::server
