// The gRPC TraceService for viewers and tools: a thin adapter over the daemon's logic (callback
// API). ListSessions, GetSnapshot (which may read a past session's snapshot file) and GetStats run
// on gRPC's thread; Diff and the baseline calls, which go to the baseline store (files, or a
// PostgreSQL server that may be away), run on a bounded worker pool (ServiceDeps::store_pool), so
// that a store that blocks never holds gRPC's threads; Watch never touches the disk on any thread
// of gRPC's (its slow states are prepared by the WatchHub's worker).
//
//   ListSessions, GetSnapshot, GetStats   service.cc       over SessionManager
//   Diff, Set/List/RemoveBaseline         service.cc       over DiffService
//   Watch                                 watch_service.cc over WatchHub (one reactor per viewer)
//
// Authentication (bearer token, TLS) is not here: it is attached to the TCP listener's
// credentials (daemon/rpc/auth.h), so every method sees only authenticated calls.
//
// Thread-safe.
#ifndef TRACETORCH_DAEMON_RPC_SERVICE_H_
#define TRACETORCH_DAEMON_RPC_SERVICE_H_

#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "daemon/core/counters.h"
#include "daemon/core/session_manager.h"
#include "grpcpp/grpcpp.h"
#include "tracetorch/v1/service.grpc.pb.h"

namespace tracetorch::daemon {

class WatchHub;
class DiffService;
class WorkerPool;

// The one place absl::Status becomes grpc::Status (codes are numerically identical).
grpc::Status ToGrpcStatus(const absl::Status& status);
// The same, for a unary call's answer: an error also carries protocol/service_errors.h's trailer,
// which says the daemon answered it.
grpc::Status ToGrpcStatus(grpc::CallbackServerContext* context, const absl::Status& status);

// What the service adapts. Not owned; all must outlive the service (and the gRPC server).
struct ServiceDeps {
  SessionManager* manager = nullptr;  // Required.
  WatchHub* watch_hub = nullptr;      // Required for Watch (else UNIMPLEMENTED).
  const DiffService* diff = nullptr;  // Required.
  // Runs the DiffService calls (Diff, Set/List/RemoveBaseline: they may block on the baseline
  // store). Required. A full queue answers RESOURCE_EXHAUSTED. Stop() it before the server's
  // Shutdown(), which waits for every call to be answered: calls still queued, and those that come
  // after, are answered UNAVAILABLE.
  WorkerPool* store_pool = nullptr;
  // Fills a DaemonStats (the daemon adds process figures and the event rate).
  std::function<v1::DaemonStats()> stats;
};

class TraceServiceImpl final : public v1::TraceService::CallbackService {
 public:
  explicit TraceServiceImpl(ServiceDeps deps) : deps_(std::move(deps)) {}

  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* GetSnapshot(grpc::CallbackServerContext* context,
                                        const v1::GetSnapshotRequest* request,
                                        v1::Snapshot* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::DaemonStats* response) override;

  // watch_service.cc
  grpc::ServerWriteReactor<v1::WatchUpdate>* Watch(grpc::CallbackServerContext* context,
                                                   const v1::WatchRequest* request) override;

  grpc::ServerUnaryReactor* Diff(grpc::CallbackServerContext* context,
                                 const v1::DiffRequest* request,
                                 v1::DiffResponse* response) override;
  grpc::ServerUnaryReactor* SetBaseline(grpc::CallbackServerContext* context,
                                        const v1::SetBaselineRequest* request,
                                        v1::BaselineInfo* response) override;
  grpc::ServerUnaryReactor* ListBaselines(grpc::CallbackServerContext* context,
                                          const v1::ListBaselinesRequest* request,
                                          v1::ListBaselinesResponse* response) override;
  grpc::ServerUnaryReactor* RemoveBaseline(grpc::CallbackServerContext* context,
                                           const v1::RemoveBaselineRequest* request,
                                           v1::RemoveBaselineResponse* response) override;

 private:
  // Finishes the call with what `call` returns, run on deps_.store_pool.
  grpc::ServerUnaryReactor* OnStorePool(grpc::CallbackServerContext* context,
                                        std::function<absl::Status()> call);

  const ServiceDeps deps_;
};

}  // namespace tracetorch::daemon

#endif  // TRACETORCH_DAEMON_RPC_SERVICE_H_
