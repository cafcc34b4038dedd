// The flight recorder a front door makes for a session (flight/layout.h): handed to its Tracer
// (Tracer::SetFlightRecorder: the hooks write where the process is) and to its DaemonSink
// (DaemonSinkOptions::flight_recorder: the memfd goes to tracetorchd with each Hello).
//
// Made unless TRACETORCH_FLIGHT_RECORDER=0 is in the environment; null when it cannot be made
// (logged once through the "tracetorch" logger: tracing goes on without it).
//
// Thread-safe.
#ifndef TRACETORCH_AGENT_FLIGHT_SETUP_H_
#define TRACETORCH_AGENT_FLIGHT_SETUP_H_

#include <memory>
#include <optional>
#include <string_view>

#include "flight/recorder.h"

namespace tracetorch::agent {

std::shared_ptr<flight::Recorder> MakeFlightRecorder();

// The flight phase named `name` ("forward", "backward", "optimizer", "outside"); nullopt
// otherwise.
std::optional<flight::Phase> ParsePhase(std::string_view name);

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_FLIGHT_SETUP_H_
