#include "server/process_tuning.h"

#include <malloc.h>

namespace topk::server {

bool KeepLargeBuffersResident() {
#if defined(__GLIBC__)
  const bool no_mmap = mallopt(M_MMAP_MAX, 0) == 1;
  const bool no_trim = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  return no_mmap && no_trim;
#else
  return false;
#endif
}

void ReleaseFreeHeapMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace topk::server
