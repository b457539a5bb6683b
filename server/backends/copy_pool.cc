#include "server/backends/copy_pool.h"

#include <pthread.h>

#include <algorithm>

namespace topk::server {

CopyPool::CopyPool(int threads) {
  const int count = std::max(threads, 0);
  {
    absl::MutexLock lock(&mu_);
    // One slot per concurrent caller is plenty for the workers of a host;
    // Run grows it under the lock if ever needed.
    tasks_.reserve(64);
  }
  threads_.reserve(count);
  for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Help(); });
}

CopyPool::~CopyPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

int CopyPool::DefaultThreads(int cores) { return std::clamp(cores / 2, 0, 16); }

void CopyPool::Work(Task& task) {
  for (int64_t i = task.next.fetch_add(1, std::memory_order_relaxed); i < task.n;
       i = task.next.fetch_add(1, std::memory_order_relaxed)) {
    task.fn(i);
  }
}

CopyPool::Task* CopyPool::OpenTaskLocked() {
  for (Task* task : tasks_) {
    if (task->joined < task->max_helpers && task->next.load(std::memory_order_relaxed) < task->n) {
      return task;
    }
  }
  return nullptr;
}

void CopyPool::Run(int64_t n, int max_helpers, absl::FunctionRef<void(int64_t)> fn) {
  const int helpers = std::min<int64_t>(std::min(max_helpers, threads()), n - 1);
  if (helpers <= 0) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Task task{.fn = fn, .n = n, .max_helpers = helpers};
  {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(&task);
  }
  Work(task);
  // Every index is taken; the helpers still inside finish theirs. Once none
  // is inside and the task is off the list, no helper can touch it again.
  absl::MutexLock lock(&mu_);
  const auto left = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return task.inside == 0; };
  mu_.Await(absl::Condition(&left));
  tasks_.erase(std::find(tasks_.begin(), tasks_.end(), &task));
}

void CopyPool::Help() {
  pthread_setname_np(pthread_self(), "topk-copy");
  while (true) {
    Task* task = nullptr;
    {
      absl::MutexLock lock(&mu_);
      const auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || OpenTaskLocked() != nullptr;
      };
      mu_.Await(absl::Condition(&wake));
      if (stop_) return;
      // A task's `next` moves outside the lock: the one that made the
      // condition true may have had its last index taken since.
      task = OpenTaskLocked();
      if (task == nullptr) continue;
      ++task->joined;
      ++task->inside;
    }
    Work(*task);
    absl::MutexLock lock(&mu_);
    --task->inside;
  }
}

}  // namespace topk::server
