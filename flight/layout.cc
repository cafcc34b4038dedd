#include "flight/layout.h"

namespace tracetorch::flight {

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kIdle:
      return "idle";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kOutside:
      return "outside";
  }
  return "unknown";
}

const char* SpanKindName(SpanKind kind) {
  return kind == SpanKind::kBackward ? "backward" : "forward";
}

}  // namespace tracetorch::flight
