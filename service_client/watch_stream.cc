// TraceServiceClient::Watch: a blocking server stream (grpc::ClientReader) with no deadline; it
// ends when the daemon finishes it or when Cancel() cancels the call. The TraceServiceClient must
// outlive its streams (the stream uses its stub and channel).
#include "service_client/watch_stream.h"

#include <memory>
#include <utility>

#include "service_client/service_client_internal.h"

namespace tracetorch::service_client {
namespace {

class GrpcWatchStream final : public WatchStream {
 public:
  GrpcWatchStream(TraceServiceClient::Impl& impl, const v1::WatchRequest& request) {
    impl.Authorize(&context_);
    reader_ = impl.stub().Watch(&context_, request);
  }

  ~GrpcWatchStream() override {
    if (!finished_) {
      context_.TryCancel();
      (void)Finish();
    }
  }

  bool Read(v1::WatchUpdate* update) override {
    if (ended_) return false;
    if (reader_->Read(update)) return true;
    ended_ = true;
    return false;
  }

  absl::Status Finish() override {
    if (finished_) return status_;
    // Finishing before the stream ended would wait for the daemon to end it: cancel instead.
    if (!ended_) {
      context_.TryCancel();
      v1::WatchUpdate discard;
      while (reader_->Read(&discard)) {
      }
      ended_ = true;
    }
    const grpc::Status s = reader_->Finish();
    status_ = s.ok() ? absl::OkStatus() : FromGrpc(s);
    finished_ = true;
    return status_;
  }

  // ClientContext::TryCancel is thread-safe.
  void Cancel() override { context_.TryCancel(); }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::WatchUpdate>> reader_;
  bool ended_ = false;     // Read returned false.
  bool finished_ = false;  // Finish called.
  absl::Status status_;
};

}  // namespace

std::unique_ptr<WatchStream> TraceServiceClient::Watch(const v1::WatchRequest& request) {
  return std::make_unique<GrpcWatchStream>(*impl_, request);
}

}  // namespace tracetorch::service_client
