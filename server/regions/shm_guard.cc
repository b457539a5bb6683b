#include "server/regions/shm_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace topk::server {
namespace {

enum SlotState : int { kFree = 0, kClaimed = 1, kLive = 2 };

// One guarded mapping. Written by Guard/Release (base and bytes while the
// slot is claimed, then published by `state`), read by the handler.
struct Slot {
  std::atomic<int> state{kFree};
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> bytes{0};
  std::atomic<bool> poisoned{false};
};
static_assert(std::atomic<int>::is_always_lock_free &&
                  std::atomic<uintptr_t>::is_always_lock_free &&
                  std::atomic<size_t>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "the SIGBUS handler may only touch lock-free atomics");

Slot g_slots[kMaxGuardedMappings];
struct sigaction g_previous {};
std::once_flag g_install_once;
int g_install_error = 0;

// Async-signal-safe: atomics, mmap and sigaction only.
void OnSigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) != kLive) continue;
    const uintptr_t base = slot.base.load(std::memory_order_relaxed);
    const size_t bytes = slot.bytes.load(std::memory_order_relaxed);
    if (address < base || address - base >= bytes) continue;
    // The lost pages become private zero pages; the access is retried on
    // them when the handler returns.
    if (mmap(reinterpret_cast<void*>(base), bytes, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      slot.poisoned.store(true, std::memory_order_release);
      return;
    }
    break;  // not repairable: the fault is fatal, as it would be unguarded
  }
  // Not a guarded mapping: what would have happened without the guard.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
    return;
  }
  // Default (a SIGBUS cannot usefully be ignored): restore it; the access
  // faults again on return and the process ends with the usual signal.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGBUS, &fallback, nullptr);
}

void Install() {
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGBUS, &action, &g_previous) != 0) g_install_error = errno;
}

}  // namespace

absl::StatusOr<ShmGuard> ShmGuard::Guard(void* base, size_t bytes) {
  std::call_once(g_install_once, Install);
  if (g_install_error != 0) {
    return absl::InternalError(absl::StrCat("sigaction(SIGBUS): ", std::strerror(g_install_error)));
  }
  for (int i = 0; i < kMaxGuardedMappings; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) {
      continue;
    }
    g_slots[i].base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
    g_slots[i].bytes.store(bytes, std::memory_order_relaxed);
    g_slots[i].poisoned.store(false, std::memory_order_relaxed);
    g_slots[i].state.store(kLive, std::memory_order_release);
    return ShmGuard(i);
  }
  return absl::ResourceExhaustedError(absl::StrCat("the server already maps ", kMaxGuardedMappings,
                                                   " shared-memory regions; unregister some"));
}

ShmGuard::~ShmGuard() { Release(); }

ShmGuard::ShmGuard(ShmGuard&& other) noexcept : slot_(std::exchange(other.slot_, -1)) {}

ShmGuard& ShmGuard::operator=(ShmGuard&& other) noexcept {
  if (this != &other) {
    Release();
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

bool ShmGuard::poisoned() const {
  return slot_ >= 0 && g_slots[slot_].poisoned.load(std::memory_order_acquire);
}

void ShmGuard::Release() {
  if (slot_ < 0) return;
  Slot& slot = g_slots[slot_];
  slot.state.store(kClaimed, std::memory_order_release);
  slot.base.store(0, std::memory_order_relaxed);
  slot.bytes.store(0, std::memory_order_relaxed);
  slot.state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

}  // namespace topk::server
