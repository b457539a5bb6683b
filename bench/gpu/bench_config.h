// topk-bench-gpu's selector options: the command-line flags that set
// CudaSelectorConfig for the timed selector and for the optional A/B
// ("alt") selector timed on the same data.
#pragma once

#include <optional>

#include "topk/cuda_selector.h"

namespace topk::bench {

// The timed selector's configuration from the flags (each flag defaults to
// CudaSelectorConfig's own default).
CudaSelectorConfig SelectorConfigFromFlags();

// The A/B selector's configuration: `base` with the --alt_* flags applied, or
// nullopt when no --alt_* flag asks for a second selector.
std::optional<CudaSelectorConfig> AltConfigFromFlags(const CudaSelectorConfig& base);

}  // namespace topk::bench
