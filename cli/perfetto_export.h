// The flight recorder's ring as a timeline: the Chrome trace event format (JSON), which
// ui.perfetto.dev and chrome://tracing open. One process per rank, one track per thread, a
// complete event ("ph": "X") per forward or backward span of a layer at its real start time (in
// microseconds from the earliest span, whose wall-clock time is in "otherData"), named by the
// layer, with its step, direction and non-finite flag in "args"; an instant event marks each
// rank's position when the bundle was taken.
//
// Spans of one track must nest (a viewer drops or misdraws overlapping ones): the forward calls of
// one thread always do; two backward calls of parallel branches can overlap without nesting, so
// a span that would overlap its track's open span without fitting inside it goes to an overflow
// track of the same thread ("thread 123 (overlap 1)").
//
// Thread-compatible; pure functions.
#ifndef TRACETORCH_CLI_PERFETTO_EXPORT_H_
#define TRACETORCH_CLI_PERFETTO_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tracetorch/v1/service.pb.h"

namespace tracetorch::cli {

struct PerfettoProcess {
  std::string name;  // "rank 1 (pid 4242)"
  int64_t pid = 0;   // The process's id in the trace (a rank number works).
  const v1::ForensicBundle* bundle = nullptr;  // Its spans and position.
};

std::string PerfettoTrace(const std::vector<PerfettoProcess>& processes);

}  // namespace tracetorch::cli

#endif  // TRACETORCH_CLI_PERFETTO_EXPORT_H_
