// A fixed set of background threads that run posted tasks in the order they were posted, with a
// bound on how many may wait: where the daemon does work that may block (a baseline store whose
// database is away) or must not hold up the thread that posts it (the live-watch hub's snapshot
// preparation, through SerialWorker), off the threads that post it (gRPC's callback threads).
//
// A task is called once: with cancelled = false on a pool thread when its turn comes, or with
// cancelled = true on the thread calling Stop() when the pool stops before its turn (so that a task
// that owes someone an answer, a gRPC reactor's Finish, can still give one). Tasks must not throw.
//
// Thread-safe: Post, Stop and the counters may be called from any thread, but Stop not from a task
// (it would wait for itself).
#ifndef TRACETORCH_DAEMON_CORE_WORKER_POOL_H_
#define TRACETORCH_DAEMON_CORE_WORKER_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace tracetorch::daemon {

struct WorkerPoolOptions {
  int threads = 1;                                         // At least 1.
  size_t max_queued = std::numeric_limits<size_t>::max();  // Tasks waiting for a thread.
};

class WorkerPool {
 public:
  using Task = std::function<void(bool cancelled)>;

  explicit WorkerPool(WorkerPoolOptions options);  // Starts the threads.
  ~WorkerPool();                                   // Stop().
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`. ResourceExhausted when max_queued tasks are already waiting, FailedPrecondition
  // once Stop() began; the task is then dropped uncalled (the caller still holds what it owes).
  absl::Status Post(Task task) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls the queued tasks with cancelled = true (on this thread, in order), waits for the running
  // ones and joins the threads. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t running() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const WorkerPoolOptions options_;
  mutable absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;               // Started by the constructor, joined by Stop().
  absl::Mutex join_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // Serialises Stop() calls.
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_CORE_WORKER_POOL_H_
