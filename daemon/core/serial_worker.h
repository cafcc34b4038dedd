// One background thread that runs tasks in the order they were posted: where the daemon does work
// that must not hold up the thread that posts it (the live-watch hub's snapshot preparation,
// daemon/core/watch_hub.h). A WorkerPool (worker_pool.h) of one thread, without a bound.
//
// Tasks must not throw. Stop() (and the destructor) runs nothing more: tasks still queued are
// dropped (destroyed unrun), the running one is waited for, the thread is joined.
//
// Thread-safe: Post and Stop may be called from any thread, but not from a task (Stop would wait
// for itself).
#ifndef TRACETORCH_DAEMON_CORE_SERIAL_WORKER_H_
#define TRACETORCH_DAEMON_CORE_SERIAL_WORKER_H_

#include <functional>
#include <utility>

#include "daemon/core/worker_pool.h"

namespace tracetorch::daemon {

class SerialWorker {
 public:
  SerialWorker() : pool_(WorkerPoolOptions{.threads = 1}) {}
  ~SerialWorker() = default;  // Stop().
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues `task`; returns false (and drops it) once Stop() began.
  bool Post(std::function<void()> task) {
    return pool_
        .Post([task = std::move(task)](bool cancelled) {
          if (!cancelled) task();
        })
        .ok();
  }

  // Idempotent.
  void Stop() { pool_.Stop(); }

 private:
  WorkerPool pool_;  // One thread; a cancelled task is dropped unrun.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_SERIAL_WORKER_H_
