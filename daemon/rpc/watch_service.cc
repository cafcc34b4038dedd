// TraceServiceImpl::Watch: one ServerWriteReactor per viewer, a thin WatchSink over the WatchHub
// (daemon/core/watch_hub.h decides what is sent and when). The method is registered raw: each
// update is written as its wire form (WatchWrite), whose payload bytes are one buffer shared by
// every viewer sent that payload (a reference-counted slice, not a copy), followed by the viewer's
// own few bytes.
//
// Lifetime: gRPC deletes nothing; the reactor deletes itself in OnDone, which gRPC calls only
// after Finish() and after every outstanding write completed. Finish() is only ever called by the
// hub through Close() (or here, when Subscribe fails), so the hub never touches a deleted
// reactor; OnDone tells the hub to forget the viewer (Remove) before the reactor goes away.
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "daemon/core/watch_hub.h"
#include "daemon/rpc/service.h"

namespace tracetorch::daemon {
namespace {

// A slice over a shared buffer: it keeps the buffer alive until gRPC drops its last reference
// (which may be after the write completed).
grpc::Slice SharedSlice(std::shared_ptr<const std::string> bytes) {
  auto* owner = new std::shared_ptr<const std::string>(std::move(bytes));
  return grpc::Slice(
      const_cast<char*>((*owner)->data()), (*owner)->size(),
      [](void* p) { delete static_cast<std::shared_ptr<const std::string>*>(p); }, owner);
}

class WatchReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>, public WatchSink {
 public:
  // Subscribes `request` (null: not a WatchRequest; `error` then says why the stream ends).
  WatchReactor(WatchHub* hub, const v1::WatchRequest* request, const absl::Status& error)
      : hub_(hub) {
    if (request == nullptr) {
      Finish(ToGrpcStatus(error));
      return;
    }
    absl::StatusOr<uint64_t> id = hub_->Subscribe(*request, this);
    if (!id.ok()) {
      Finish(ToGrpcStatus(id.status()));
      return;
    }
    id_.store(*id, std::memory_order_release);
  }

  // WatchSink (called by the hub, one call at a time, never after Close).
  void SendUpdate(WatchWrite write) override {
    grpc::Slice slices[2];
    size_t n = 0;
    if (write.shared != nullptr) slices[n++] = SharedSlice(std::move(write.shared));
    slices[n++] = grpc::Slice(write.own);
    grpc::ByteBuffer buffer(slices, n);  // Takes references to the slices.
    in_flight_.Swap(&buffer);
    StartWrite(&in_flight_);
  }
  void Close(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }

  // Reactions.
  void OnWriteDone(bool ok) override {
    in_flight_.Clear();  // Before the hub may hand over the next one.
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
  grpc::ByteBuffer in_flight_;   // Kept until OnWriteDone.
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* TraceServiceImpl::Watch(
    grpc::CallbackServerContext* /*context*/, const grpc::ByteBuffer* request) {
  if (deps_.watch_hub == nullptr) {
    return new WatchReactor(nullptr, nullptr, absl::UnimplementedError("Watch is not served"));
  }
  v1::WatchRequest parsed;
  grpc::ByteBuffer bytes(*request);  // Deserialize consumes its buffer; this shares the slices.
  if (!grpc::SerializationTraits<v1::WatchRequest>::Deserialize(&bytes, &parsed).ok()) {
    return new WatchReactor(nullptr, nullptr,
                            absl::InvalidArgumentError("Watch: the request is not a WatchRequest"));
  }
  return new WatchReactor(deps_.watch_hub, &parsed, absl::OkStatus());
}

}  // namespace tracetorch::daemon
