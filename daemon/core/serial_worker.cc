#include "daemon/core/serial_worker.h"

#include <utility>

namespace tracetorch::daemon {

SerialWorker::SerialWorker() : thread_([this] { Run(); }) {}

SerialWorker::~SerialWorker() { Stop(); }

bool SerialWorker::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  tasks_.push_back(std::move(task));
  return true;
}

void SerialWorker::Stop() {
  absl::MutexLock join(&join_mu_);
  std::deque<std::function<void()>> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(tasks_);
  }
  if (thread_.joinable()) thread_.join();
  // `dropped` is destroyed here, outside the lock: a task's captures may take locks of their own.
}

void SerialWorker::Run() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace tracetorch::daemon
