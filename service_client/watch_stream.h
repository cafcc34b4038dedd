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
  // Unavailable when the daemon went away, NotFound for an unknown session, ...
  virtual absl::Status Finish() = 0;
  virtual void Cancel() = 0;
};

}  // namespace tracetorch::service_client

#endif  // TRACETORCH_SERVICE_CLIENT_WATCH_STREAM_H_
