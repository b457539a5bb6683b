// Process-wide settings for serving large messages.
#pragma once

#include <cstdint>

namespace topk::server {

// Keeps freed large buffers in the heap instead of returning them to the OS.
// A 64 x 128K request is 32 MiB; glibc serves every allocation above 32 MiB
// (its largest mmap threshold) with a fresh mmap, so each request would pay
// ~8K page faults for its protobuf bytes field alone. With mmap off and a
// high trim threshold, memory reaches its high-water mark once and is reused.
// Cost: RSS stays at that mark. Returns false if glibc refused.
bool KeepLargeBuffersResident();

// glibc's malloc arenas when --malloc_arenas is not given: one, so the idle
// release can return a whole burst (see LimitMallocArenas). Threads then
// share the arena's lock for allocations beyond their small-size cache.
inline constexpr int kDefaultMallocArenas = 1;

// Caps glibc's malloc arenas at `arenas` (0: glibc's own bound, 8 per core).
// malloc_trim returns the free top of the main arena's heap, but in the
// other arenas only free chunks inside the heap: a burst's buffers freed
// into the top of a thread arena stay resident while the 1 GiB trim
// threshold above holds, so with one arena per gRPC thread about half of a
// burst's growth never went back. Call before any thread starts. Returns
// false if glibc refused.
bool LimitMallocArenas(int arenas);

// Returns the heap's free pages to the OS (glibc's malloc_trim), so the
// resident set falls back after a burst of large requests even when
// KeepLargeBuffersResident() keeps freed buffers in the heap under load.
void ReleaseFreeHeapMemory();

// This process's resident set in bytes (/proc/self/statm), or -1.
int64_t ResidentBytes();

// Turns absl::Mutex's deadlock detection off (on: leaves it as the library
// was built). A Mutex library built without NDEBUG (as some distributions
// ship it) checks every Lock() of every absl::Mutex in the process, gRPC's
// own locks included, against one lock-order graph under one global spin
// lock, and records and removes a graph node for every Mutex created and
// destroyed (gRPC makes several per call). Under concurrent load that one
// spin lock serialises the whole message path: threads queue on it and
// sleep, so throughput stops rising while the cores stay mostly idle.
// Call first thing in main, before any thread starts.
void SetMutexDeadlockDetection(bool on);

}  // namespace topk::server
