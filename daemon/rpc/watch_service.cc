// TraceServiceImpl::Watch: one ServerWriteReactor per viewer, a thin WatchSink over the WatchHub
// (daemon/core/watch_hub.h decides what is sent and when).
//
// Lifetime: gRPC deletes nothing; the reactor deletes itself in OnDone, which gRPC calls only
// after Finish() and after every outstanding write completed. Finish() is only ever called by the
// hub through Close() (or here, when Subscribe fails), so the hub never touches a deleted
// reactor; OnDone tells the hub to forget the viewer (Remove) before the reactor goes away.
#include <atomic>
#include <memory>
#include <utility>

#include "daemon/core/watch_hub.h"
#include "daemon/rpc/service.h"

namespace tracetorch::daemon {
namespace {

class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchUpdate>, public WatchSink {
 public:
  WatchReactor(WatchHub* hub, const v1::WatchRequest& request) : hub_(hub) {
    absl::StatusOr<uint64_t> id = hub_->Subscribe(request, this);
    if (!id.ok()) {
      Finish(ToGrpcStatus(id.status()));
      return;
    }
    id_.store(*id, std::memory_order_release);
  }

  // WatchSink (called by the hub, one call at a time, never after Close).
  void SendUpdate(std::shared_ptr<const v1::WatchUpdate> update) override {
    in_flight_ = std::move(update);
    StartWrite(in_flight_.get());
  }
  void Close(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }

  // Reactions.
  void OnWriteDone(bool ok) override {
    in_flight_.reset();  // Before the hub may hand over the next one.
    hub_->WriteDone(id(), ok);
  }
  void OnCancel() override {
    if (const uint64_t viewer = id(); viewer != 0) hub_->Cancel(viewer);
  }
  void OnDone() override {
    if (const uint64_t viewer = id(); viewer != 0) hub_->Remove(viewer);
    delete this;
  }

 private:
  uint64_t id() const { return id_.load(std::memory_order_acquire); }

  WatchHub* const hub_;
  std::atomic<uint64_t> id_{0};  // 0: not subscribed (the stream was finished at once).
  std::shared_ptr<const v1::WatchUpdate> in_flight_;  // Kept alive until OnWriteDone.
};

}  // namespace

grpc::ServerWriteReactor<v1::WatchUpdate>* TraceServiceImpl::Watch(
    grpc::CallbackServerContext* context, const v1::WatchRequest* request) {
  if (deps_.watch_hub == nullptr) {
    return v1::TraceService::CallbackService::Watch(context, request);  // UNIMPLEMENTED.
  }
  return new WatchReactor(deps_.watch_hub, *request);
}

}  // namespace tracetorch::daemon
