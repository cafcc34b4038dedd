// What `tracetorch forensics SESSION` prints: a session's forensic bundles (service.proto
// ForensicBundle; daemon/core/forensics.h says what they hold) for a person. For each bundle:
// why it was written and when, how the process ended, where it was (the flight recorder's
// position and since when), what went non-finite first (the NaN origin, and the first span the
// ring saw go non-finite), the layers around the position over the last steps (forward and
// backward latency from the ring, output std and gradient norm from the history, as sparklines),
// and the thread stacks when they were taken.
//
// Thread-compatible; pure functions.
#ifndef TRACETORCH_CLI_FORENSICS_VIEW_H_
#define TRACETORCH_CLI_FORENSICS_VIEW_H_

#include <cstddef>
#include <string>

#include "tracetorch/v1/service.pb.h"
#include "view/text.h"

namespace tracetorch::cli {

struct ForensicsViewOptions {
  view::Style style = view::Style::Plain();
  size_t steps = 8;         // Sparkline points: the last this many steps.
  size_t layers = 4;        // Layers shown on each side of the position's layer.
  size_t stack_lines = 80;  // Of each tool's stacks (the rest is summarised).
};

std::string RenderForensics(const v1::ForensicsResponse& response,
                            const ForensicsViewOptions& options);

// One bundle (RenderForensics prints each of these under a header).
std::string RenderBundle(const v1::ForensicBundle& bundle, const ForensicsViewOptions& options);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_FORENSICS_VIEW_H_
