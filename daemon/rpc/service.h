// The gRPC TraceService for viewers and tools: a thin adapter over the daemon's logic (callback
// API). ListSessions, GetSnapshot (which may read a past session's snapshot file) and GetStats run
// on gRPC's thread; Diff and the baseline calls, which go to the baseline store (files, or a
// PostgreSQL server that may be away), run on a bounded worker pool (ServiceDeps::store_pool), so
// that a store that blocks never holds gRPC's threads; Watch never touches the disk on any thread
// of gRPC's (its slow states are prepared by the WatchHub's worker).
//
//   ListSessions, GetSnapshot, GetStats   service.cc       over SessionManager
//   GetForensics                          service.cc       over FlightMonitor
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
class FlightMonitor;
class FleetRegistry;

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
  // Forensic bundles (GetForensics). Null: sessions have none (a service-only daemon).
  FlightMonitor* flight = nullptr;
  // The fleet store GetJob answers from (every daemon's registered ranks). Null: this daemon's.
  FleetRegistry* fleet = nullptr;
};

// Watch is registered raw (its requests and updates as bytes): the hub gives each update's wire
// form with the payload serialized once for all its viewers (WatchWrite), which the typed
// callback API would serialize again for every viewer.
class TraceServiceImpl final
    : public v1::TraceService::WithRawCallbackMethod_Watch<v1::TraceService::CallbackService> {
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
  // The session's forensic bundles (FlightMonitor::Bundles; a past session's are read from its
  // file). NotFound for an unknown session.
  grpc::ServerUnaryReactor* GetForensics(grpc::CallbackServerContext* context,
                                         const v1::GetForensicsRequest* request,
                                         v1::ForensicsResponse* response) override;
  // The job's sessions on this daemon; with a fleet store (ServiceDeps::fleet), every daemon's
  // registered there (on the store pool: the store may block).
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::JobResponse* response) override;

  // watch_service.cc: `request` is a serialized v1::WatchRequest (INVALID_ARGUMENT otherwise);
  // the stream's messages are serialized v1::WatchUpdate.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request) override;

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
