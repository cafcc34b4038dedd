// TraceServiceClient::Watch (placeholder until the watch stream lands).
#include "client/watch_stream.h"

#include "client/service_client_internal.h"

namespace tracetorch::client {
namespace {

class UnimplementedStream final : public WatchStream {
 public:
  bool Read(v1::WatchUpdate* /*update*/) override { return false; }
  absl::Status Finish() override { return absl::UnimplementedError("Watch"); }
  void Cancel() override {}
};

}  // namespace

std::unique_ptr<WatchStream> TraceServiceClient::Watch(const v1::WatchRequest& /*request*/) {
  return std::make_unique<UnimplementedStream>();
}

}  // namespace tracetorch::client
