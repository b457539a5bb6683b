// The byte copy every RowSource uses, with a choice of how it writes: through
// the caches (memcpy) or past them. A staging copy into pinned memory that a
// DMA engine reads next gains nothing from caching what it writes, and a
// cached store of a line first reads it (read for ownership): one extra pass
// over the destination's bytes in host memory. Streaming stores skip both.
#pragma once

#include <cstddef>

namespace topk::server {

enum class CopyStores {
  kCached,     // memcpy
  kStreaming,  // non-temporal stores for the aligned body (x86-64; memcpy elsewhere)
};

// Copies `bytes` from `src` to `dest` (not overlapping). With kStreaming the
// stores are ordered (a store fence) before it returns, so a DMA read issued
// by this thread afterwards sees them.
void CopyBytes(std::byte* dest, const std::byte* src, size_t bytes, CopyStores stores);

}  // namespace topk::server
