// One background thread that runs tasks in the order they were posted: where the daemon does
// work that must not hold up the thread that posts it (the live-watch hub's snapshot preparation,
// daemon/core/watch_hub.h).
//
// Tasks must not throw. Stop() (and the destructor) runs nothing more: tasks still queued are
// dropped (destroyed unrun), the running one is waited for, the thread is joined.
//
// Thread-safe: Post and Stop may be called from any thread, but not from a task (Stop would wait
// for itself).
#ifndef TRACETORCH_DAEMON_CORE_SERIAL_WORKER_H_
#define TRACETORCH_DAEMON_CORE_SERIAL_WORKER_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tracetorch::daemon {

class SerialWorker {
 public:
  SerialWorker();
  ~SerialWorker();  // Stop().
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues `task`; returns false (and drops it) once Stop() began.
  bool Post(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Started by the constructor, joined by the first Stop().
  absl::Mutex join_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // Serialises Stop() calls.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_SERIAL_WORKER_H_
