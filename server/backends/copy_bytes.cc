#include "server/backends/copy_bytes.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace topk::server {

namespace {

// Below this the fence and the alignment head cost more than the stores save.
constexpr size_t kStreamingMinBytes = 4096;

}  // namespace

void CopyBytes(std::byte* dest, const std::byte* src, size_t bytes, CopyStores stores) {
#if defined(__x86_64__)
  if (stores == CopyStores::kStreaming && bytes >= kStreamingMinBytes) {
    // Head up to the destination's next 16-byte boundary (what the stores need).
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(dest) & 15)) & 15;
    std::memcpy(dest, src, head);
    dest += head;
    src += head;
    bytes -= head;
    // 64 bytes (one line) per step: four unaligned loads, four streaming stores.
    const size_t body = bytes & ~size_t{63};
    for (size_t at = 0; at < body; at += 64) {
      const auto* in = reinterpret_cast<const __m128i*>(src + at);
      auto* out = reinterpret_cast<__m128i*>(dest + at);
      const __m128i a = _mm_loadu_si128(in);
      const __m128i b = _mm_loadu_si128(in + 1);
      const __m128i c = _mm_loadu_si128(in + 2);
      const __m128i d = _mm_loadu_si128(in + 3);
      _mm_stream_si128(out, a);
      _mm_stream_si128(out + 1, b);
      _mm_stream_si128(out + 2, c);
      _mm_stream_si128(out + 3, d);
    }
    std::memcpy(dest + body, src + body, bytes - body);
    _mm_sfence();
    return;
  }
#endif
  (void)stores;
  if (bytes > 0) std::memcpy(dest, src, bytes);
}

}  // namespace topk::server
