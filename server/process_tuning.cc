#include "server/process_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <fstream>

#include "absl/synchronization/mutex.h"

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

bool LimitMallocArenas(int arenas) {
  if (arenas <= 0) return true;
#if defined(__GLIBC__)
  return mallopt(M_ARENA_MAX, arenas) == 1;
#else
  return false;
#endif
}

void ReleaseFreeHeapMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  int64_t resident = 0;
  if (!(statm >> pages >> resident)) return -1;
  return resident * sysconf(_SC_PAGESIZE);
}

void SetMutexDeadlockDetection(bool on) {
  if (!on) absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace topk::server
