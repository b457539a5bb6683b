// On-device verification of a selection (the benchmark checks every timed
// output without copying it back).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernel_args.h"

namespace topk::cuda {

// Per row of `args` (num_rows rows of type dtype, rank k <= 8192): indices distinct and in
// range, padding -1 beyond min(L, k), and as many valid values strictly above
// the minimum selected value in the row as among the selected. Adds the
// number of failing rows to *bad_rows and lowers *first_bad to the first one
// (both device pointers).
cudaError_t LaunchVerify(const DeviceArgs& args, int32_t k, ScoreType dtype, int64_t num_rows,
                         unsigned long long* bad_rows, int* first_bad, cudaStream_t stream);

}  // namespace topk::cuda
