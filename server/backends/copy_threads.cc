#include "server/backends/copy_threads.h"

namespace topk::server {

CopyThreads::CopyThreads(int helpers, std::function<void()> on_start) {
  threads_.reserve(helpers > 0 ? helpers : 0);
  for (int i = 0; i < helpers; ++i) {
    threads_.emplace_back([this, on_start] { Help(on_start); });
  }
}

CopyThreads::~CopyThreads() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void CopyThreads::Work(absl::FunctionRef<void(int64_t)> fn, int64_t n) {
  for (int64_t i = next_.fetch_add(1, std::memory_order_relaxed); i < n;
       i = next_.fetch_add(1, std::memory_order_relaxed)) {
    fn(i);
  }
}

void CopyThreads::Run(int64_t n, absl::FunctionRef<void(int64_t)> fn) {
  if (threads_.empty() || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  next_.store(0, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&mu_);
    fn_ = &fn;
    n_ = n;
    checked_in_ = 0;
    ++generation_;
  }
  Work(fn, n);
  // Every helper checks in for every Run, so none can still be reading fn
  // once this returns.
  absl::MutexLock lock(&mu_);
  const int helpers = static_cast<int>(threads_.size());
  const auto all_in = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return checked_in_ == helpers; };
  mu_.Await(absl::Condition(&all_in));
  fn_ = nullptr;
}

void CopyThreads::Help(const std::function<void()>& on_start) {
  if (on_start) on_start();
  uint64_t seen = 0;
  while (true) {
    const absl::FunctionRef<void(int64_t)>* fn = nullptr;
    int64_t n = 0;
    {
      absl::MutexLock lock(&mu_);
      const auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || generation_ != seen;
      };
      mu_.Await(absl::Condition(&wake));
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
    }
    Work(*fn, n);
    absl::MutexLock lock(&mu_);
    ++checked_in_;
  }
}

}  // namespace topk::server
