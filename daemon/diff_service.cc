// TraceServiceImpl::Diff and the named-baseline methods (placeholder until they land).
#include "daemon/service.h"

namespace tracetorch::daemon {

grpc::ServerUnaryReactor* TraceServiceImpl::Diff(grpc::CallbackServerContext* context,
                                                 const v1::DiffRequest* request,
                                                 v1::DiffResponse* response) {
  return v1::TraceService::CallbackService::Diff(context, request, response);
}
grpc::ServerUnaryReactor* TraceServiceImpl::SetBaseline(grpc::CallbackServerContext* context,
                                                        const v1::SetBaselineRequest* request,
                                                        v1::BaselineInfo* response) {
  return v1::TraceService::CallbackService::SetBaseline(context, request, response);
}
grpc::ServerUnaryReactor* TraceServiceImpl::ListBaselines(grpc::CallbackServerContext* context,
                                                          const v1::ListBaselinesRequest* request,
                                                          v1::ListBaselinesResponse* response) {
  return v1::TraceService::CallbackService::ListBaselines(context, request, response);
}
grpc::ServerUnaryReactor* TraceServiceImpl::RemoveBaseline(grpc::CallbackServerContext* context,
                                                           const v1::RemoveBaselineRequest* request,
                                                           v1::RemoveBaselineResponse* response) {
  return v1::TraceService::CallbackService::RemoveBaseline(context, request, response);
}

}  // namespace tracetorch::daemon
