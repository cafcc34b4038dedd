// A scripted Watch stream for the tests of the watch drivers (remote_watch_test.cc,
// multi_job_watch_test.cc). Test-only.
#ifndef TRACETORCH_CLI_FAKE_WATCH_STREAM_H_
#define TRACETORCH_CLI_FAKE_WATCH_STREAM_H_

#include <deque>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "service_client/watch_stream.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::cli::test_util {

// A scripted stream: its updates, then (optionally after blocking until Cancel) `finish`.
// `blocked` (if set) is notified when the stream first blocks at its end: the watcher has read
// and drawn everything before it.
class FakeStream : public service_client::WatchStream {
 public:
  FakeStream(std::vector<v1::WatchUpdate> updates, absl::Status finish, bool block_at_end,
             absl::Notification* blocked)
      : updates_(updates.begin(), updates.end()),
        finish_(std::move(finish)),
        block_at_end_(block_at_end),
        blocked_(blocked) {}

  bool Read(v1::WatchUpdate* update) override {
    absl::MutexLock lock(&mu_);
    if (!cancelled_ && !updates_.empty()) {
      *update = std::move(updates_.front());
      updates_.pop_front();
      return true;
    }
    if (block_at_end_) {
      if (blocked_ != nullptr && !blocked_->HasBeenNotified()) blocked_->Notify();
      mu_.Await(absl::Condition(&cancelled_));
    }
    return false;
  }
  absl::Status Finish() override {
    absl::MutexLock lock(&mu_);
    return cancelled_ ? absl::CancelledError("cancelled") : finish_;
  }
  void Cancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }

 private:
  absl::Mutex mu_;
  std::deque<v1::WatchUpdate> updates_ ABSL_GUARDED_BY(mu_);
  const absl::Status finish_;
  const bool block_at_end_;
  absl::Notification* const blocked_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tracetorch::cli::test_util

#endif  // TRACETORCH_CLI_FAKE_WATCH_STREAM_H_
