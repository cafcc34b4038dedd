#include "agent/flight_setup.h"

#include <cstdlib>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "guest/log.h"

namespace tracetorch::agent {

std::shared_ptr<flight::Recorder> MakeFlightRecorder() {
  const char* env = std::getenv("TRACETORCH_FLIGHT_RECORDER");
  if (env != nullptr && std::string_view(env) == "0") return nullptr;
  absl::StatusOr<std::unique_ptr<flight::Recorder>> recorder = flight::Recorder::Create();
  if (!recorder.ok()) {
    guest::WarnOnce("flight_recorder",
                    absl::StrCat("tracetorch: no flight recorder: ", recorder.status().message()));
    return nullptr;
  }
  return std::shared_ptr<flight::Recorder>(*std::move(recorder));
}

std::optional<flight::Phase> ParsePhase(std::string_view name) {
  if (name == "forward") return flight::Phase::kForward;
  if (name == "backward") return flight::Phase::kBackward;
  if (name == "optimizer") return flight::Phase::kOptimizer;
  if (name == "outside") return flight::Phase::kOutside;
  return std::nullopt;
}

}  // namespace tracetorch::agent
