#include "worker_pool.h"

namespace topk::cpu {

WorkerPool::WorkerPool(int threads) {
  for (int w = 1; w < threads; ++w) threads_.emplace_back([this, w] { WorkerLoop(w); });
}

WorkerPool::~WorkerPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::RunOnAll(absl::FunctionRef<void(int)> fn) {
  {
    absl::MutexLock lock(&mu_);
    job_ = &fn;
    ++generation_;
    running_ = static_cast<int>(threads_.size());
  }
  fn(0);
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0; };
  mu_.Await(absl::Condition(&done));
  job_ = nullptr;
}

void WorkerPool::WorkerLoop(int worker) {
  uint64_t seen = 0;
  while (true) {
    const absl::FunctionRef<void(int)>* job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, seen]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || generation_ != seen; };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(worker);
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace topk::cpu
