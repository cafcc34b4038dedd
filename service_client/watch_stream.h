// One viewer's Watch stream (service.proto TraceService.Watch), read with blocking calls.
//
// Example:
//   std::unique_ptr<WatchStream> stream = client->Watch(request);
//   v1::WatchUpdate update;
//   while (stream->Read(&update)) { ... }
//   absl::Status status = stream->Finish();  // OK after session_ended / shutdown.
//
// Thread-safe only for Cancel(): Read and Finish belong to one reader thread; Cancel() may be
// called from any thread (a signal-watching thread, a test) and makes a blocked Read return false.
// A stream from TraceServiceClient::Watch has no deadline and must not outlive its client;
// destroying it before Finish cancels it.
#ifndef TRACETORCH_SERVICE_CLIENT_WATCH_STREAM_H_
#define TRACETORCH_SERVICE_CLIENT_WATCH_STREAM_H_

#include <memory>

#include "absl/status/status.h"
#include "tracetorch/v1/service.pb.h"

namespace tracetorch::service_client {

class WatchStream {
 public:
  virtual ~WatchStream() = default;
  // The next update; false when the stream has ended (then call Finish).
  virtual bool Read(v1::WatchUpdate* update) = 0;
  // How the stream ended: OK after session end or daemon shutdown, Cancelled after Cancel(),
  // Unavailable when the daemon went away, NotFound for an unknown session, ... Called before Read
  // returned false, it cancels the stream first (and returns Cancelled) instead of waiting for the
  // daemon to end it. Later calls return the same status.
  virtual absl::Status Finish() = 0;
  // Ends the stream early: a blocked or later Read returns false.
  virtual void Cancel() = 0;
};

}  // namespace tracetorch::service_client

#endif  // TRACETORCH_SERVICE_CLIENT_WATCH_STREAM_H_
