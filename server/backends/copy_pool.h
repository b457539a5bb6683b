// Threads shared by every GPU worker of the process that help one caller at a
// time or several at once run a loop in parallel: the CUDA backend's staging
// copy, which one core cannot run at the speed of the link. A large request
// alone gets every idle thread (up to the cap it asks for); concurrent
// requests share them. The caller's thread works too; Run returns when every
// index is done. Nothing is allocated per Run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace topk::server {

class CopyPool {
 public:
  // `threads` helpers (0: every Run is a plain loop on its caller).
  explicit CopyPool(int threads);
  ~CopyPool();

  CopyPool(const CopyPool&) = delete;
  CopyPool& operator=(const CopyPool&) = delete;

  // Calls fn(i) once for every i in [0, n), on the calling thread and on at
  // most `max_helpers` helpers, in no particular order. Any number of
  // callers may Run at once.
  void Run(int64_t n, int max_helpers, absl::FunctionRef<void(int64_t)> fn);

  int threads() const { return static_cast<int>(threads_.size()); }

  // Helpers for a host with `cores` cores: half of them, at most 16 (a copy
  // out of host memory saturates well before).
  static int DefaultThreads(int cores);

 private:
  // One Run's loop; lives on its caller's stack until every helper that
  // joined it has left.
  struct Task {
    absl::FunctionRef<void(int64_t)> fn;
    int64_t n = 0;
    int max_helpers = 0;
    std::atomic<int64_t> next{0};
    int joined = 0;  // helpers that took part (guarded by mu_)
    int inside = 0;  // helpers working on it now (guarded by mu_)
  };

  void Help();
  static void Work(Task& task);
  // A task a helper may join: indices left and room for one more helper.
  Task* OpenTaskLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Task*> tasks_ ABSL_GUARDED_BY(mu_);  // running Runs, reserved up front
  std::vector<std::thread> threads_;
};

}  // namespace topk::server
