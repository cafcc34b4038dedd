#include "daemon/core/worker_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tracetorch::daemon {

WorkerPool::WorkerPool(WorkerPoolOptions options) : options_(options) {
  const int threads = std::max(options_.threads, 1);
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() { Stop(); }

absl::Status WorkerPool::Post(Task task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("the worker pool is stopping");
  // Idle threads are about to take tasks from the queue: those do not wait.
  const size_t idle = threads_.size() - std::min(running_, threads_.size());
  const size_t waiting = tasks_.size() > idle ? tasks_.size() - idle : 0;
  if (waiting >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        absl::StrCat(waiting, " tasks are already waiting for ", threads_.size(),
                     threads_.size() == 1 ? " thread" : " threads"));
  }
  tasks_.push_back(std::move(task));
  return absl::OkStatus();
}

void WorkerPool::Stop() {
  absl::MutexLock join(&join_mu_);
  std::deque<Task> cancelled;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cancelled.swap(tasks_);
  }
  // Outside the lock: a task may take locks of its own, or post (and be refused).
  for (Task& task : cancelled) task(/*cancelled=*/true);
  cancelled.clear();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

size_t WorkerPool::queued() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

size_t WorkerPool::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

void WorkerPool::Run() {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task(/*cancelled=*/false);
    task = nullptr;  // Its captures go before the count says it is done.
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace tracetorch::daemon
