// A few persistent threads that help one caller run a loop in parallel: the
// CUDA backend's staging copy, which one core cannot run at the speed of
// the link. The caller's thread works too; Run returns when every index is
// done. Nothing is allocated per Run.
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

class CopyThreads {
 public:
  // `helpers` threads besides the caller (0: Run is a plain loop); each
  // calls `on_start` once before any work (e.g. to select its GPU).
  explicit CopyThreads(int helpers, std::function<void()> on_start = nullptr);
  ~CopyThreads();

  CopyThreads(const CopyThreads&) = delete;
  CopyThreads& operator=(const CopyThreads&) = delete;

  // Calls fn(i) once for every i in [0, n), on the helpers and the calling
  // thread, in no particular order. One Run at a time.
  void Run(int64_t n, absl::FunctionRef<void(int64_t)> fn);

  int helpers() const { return static_cast<int>(threads_.size()); }

 private:
  void Help(const std::function<void()>& on_start);
  // Takes indices until none are left.
  void Work(absl::FunctionRef<void(int64_t)> fn, int64_t n);

  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // one per Run
  int checked_in_ ABSL_GUARDED_BY(mu_) = 0;       // helpers done with this Run
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // This Run's loop; valid until every helper checked in.
  const absl::FunctionRef<void(int64_t)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t n_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> next_{0};
  std::vector<std::thread> threads_;
};

}  // namespace topk::server
