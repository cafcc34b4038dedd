// TraceServiceImpl::Watch (placeholder until the WatchHub lands).
#include "daemon/service.h"

namespace tracetorch::daemon {

grpc::ServerWriteReactor<v1::WatchUpdate>* TraceServiceImpl::Watch(
    grpc::CallbackServerContext* context, const v1::WatchRequest* request) {
  return v1::TraceService::CallbackService::Watch(context, request);
}

}  // namespace tracetorch::daemon
