// Streams what a Tracer records to tracetorchd: an EventSink (agent/tracer.h) over the client
// shim's DaemonClient (client/daemon_client.h).
//
// The sink only converts and enqueues: DaemonClient's bounded queue never blocks, so a hook never
// waits on the network; a full queue (or a daemon that is away) drops and counts, and the count
// reaches the daemon and, through stats(), the trace metadata. Creating a sink does not wait for
// the daemon: when it is absent the client retries in the background while the Tracer keeps
// recording embedded.
//
// Fork: the Tracer never calls a sink in a forked child, and the DaemonClient copy there is inert.
//
// Thread-safe.
//
// Example:
//   DaemonSinkOptions options;
//   options.client.address = "unix:///run/user/1000/tracetorch/tracetorchd.sock";
//   options.client.identity = CurrentProcessIdentity();
//   absl::StatusOr<std::shared_ptr<DaemonSink>> sink = DaemonSink::Create(std::move(options));
//   tracer->SetEventSink(*sink);
//   ... train ...
//   tracer->SetEventSink(nullptr);
//   (*sink)->Close(total_ms, tracer->hook_errors(), absl::Seconds(1));
#ifndef TRACETORCH_AGENT_DAEMON_SINK_H_
#define TRACETORCH_AGENT_DAEMON_SINK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/tracer.h"
#include "client/daemon_client.h"
#include "flight/recorder.h"

namespace tracetorch::agent {

struct DaemonSinkOptions {
  client::DaemonClientOptions client;
  // The session's flight recorder (flight_setup.h), or null: its memfd goes to the daemon with
  // each Hello (the client's flight_recorder_fd and layout fields are set from it).
  std::shared_ptr<const flight::Recorder> flight_recorder;
};

class DaemonSink final : public EventSink {
 public:
  // InvalidArgument for a malformed address (see protocol::ParseDaemonAddress) or invalid client
  // options. Succeeds when the daemon is absent.
  static absl::StatusOr<std::shared_ptr<DaemonSink>> Create(DaemonSinkOptions options);
  ~DaemonSink() override;  // Closes the client (bounded wait) unless Close() was called.

  void OnLayerDeclared(LayerId layer, const LayerInfo& info) override;
  void OnForward(LayerId layer, int64_t step, const ForwardSample& sample) override;
  void OnBackward(LayerId layer, int64_t step, const BackwardSample& sample) override;
  void OnNanOrigin(const NanOrigin& origin) override;
  // The op graph a TraceSession(ops="on_nan") kept, with the origin it names (origin.op set):
  // streamed once (DaemonClient::SetOpGraph).
  // Without an origin (the value never reached a layer output) the graph goes alone.
  void SendOpGraph(const std::optional<NanOrigin>& origin, std::string op_graph_json);

  // Sends what is queued and the End (with the total time and hook errors), waiting at most
  // `wait`. DeadlineExceeded when the daemon did not take everything in time (the rest is counted
  // as dropped); FailedPrecondition when already closed or in a forked child.
  absl::Status Close(std::optional<double> total_time_ms, uint64_t hook_errors,
                     absl::Duration wait);

  client::DaemonClientStats stats() const;
  std::string session_id() const;  // Empty until the first handshake.
  client::DaemonClient& client() { return *client_; }

 private:
  explicit DaemonSink(std::unique_ptr<client::DaemonClient> client);

  const std::unique_ptr<client::DaemonClient> client_;
};

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_DAEMON_SINK_H_
