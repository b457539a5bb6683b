// A fixed set of worker threads that run one job at a time on all of them.
// Threads are started once (a server must not spawn threads per request); the
// caller's thread takes part as worker 0.
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace topk::cpu {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);  // threads >= 1, including the caller
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()) + 1; }

  // Calls fn(w) once for every worker w in [0, size()), concurrently, and
  // returns when all calls have returned. One job at a time: callers serialise.
  void RunOnAll(absl::FunctionRef<void(int)> fn);

 private:
  void WorkerLoop(int worker);

  absl::Mutex mu_;
  const absl::FunctionRef<void(int)>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace topk::cpu
