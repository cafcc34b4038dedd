#include "agent/daemon_sink.h"

#include <utility>

namespace tracetorch::agent {

absl::StatusOr<std::shared_ptr<DaemonSink>> DaemonSink::Create(DaemonSinkOptions options) {
  if (options.flight_recorder != nullptr && options.flight_recorder->fd() >= 0) {
    options.client.flight_recorder_fd = options.flight_recorder->fd();  // The client dups it.
    options.client.flight_layout_version = flight::kLayoutVersion;
    options.client.flight_region_bytes = options.flight_recorder->size();
  }
  absl::StatusOr<std::unique_ptr<client::DaemonClient>> c =
      client::DaemonClient::Create(std::move(options.client));
  if (!c.ok()) return c.status();
  return std::shared_ptr<DaemonSink>(new DaemonSink(*std::move(c)));
}

DaemonSink::DaemonSink(std::unique_ptr<client::DaemonClient> client) : client_(std::move(client)) {}

// The DaemonClient's destructor closes it with a bounded wait (or leaks it in a forked child).
DaemonSink::~DaemonSink() = default;

void DaemonSink::OnLayerDeclared(LayerId layer, const LayerInfo& info) {
  if (layer < 0) return;
  const protocol::LayerDecl decl{static_cast<uint32_t>(layer), info};
  client_->DeclareLayers({&decl, 1});
}

void DaemonSink::OnForward(LayerId layer, int64_t step, const ForwardSample& sample) {
  if (layer < 0 || step < 0) return;
  client_->EnqueueForward(
      protocol::ToForwardEvent(static_cast<uint32_t>(layer), static_cast<uint64_t>(step), sample));
}

void DaemonSink::OnBackward(LayerId layer, int64_t step, const BackwardSample& sample) {
  if (layer < 0 || step < 0) return;
  protocol::BackwardEvent event;
  event.layer_id = static_cast<uint32_t>(layer);
  event.step = static_cast<uint64_t>(step);
  event.sample = sample;
  client_->EnqueueBackward(event);
}

void DaemonSink::OnNanOrigin(const NanOrigin& origin) { client_->SetNanOrigin(origin); }

void DaemonSink::SendOpGraph(const std::optional<NanOrigin>& origin, std::string op_graph_json) {
  if (origin) client_->SetNanOrigin(*origin);
  client_->SetOpGraph(std::move(op_graph_json));
}

absl::Status DaemonSink::Close(std::optional<double> total_time_ms, uint64_t hook_errors,
                               absl::Duration wait) {
  client_->SetEndInfo(total_time_ms, hook_errors);
  return client_->Close(wait);
}

client::DaemonClientStats DaemonSink::stats() const { return client_->stats(); }

std::string DaemonSink::session_id() const { return client_->session_id(); }

}  // namespace tracetorch::agent
