// Trace records for the daemon's tests (not part of tracetorchd).
#ifndef TRACETORCH_DAEMON_TESTING_RECORDS_H_
#define TRACETORCH_DAEMON_TESTING_RECORDS_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "trace/record.h"

namespace tracetorch::daemon::test_util {

// A record of `model` with `layers` Linear layers "l0".."l<layers-1>": layer i has latency
// 0.5 + i ms (latest and mean) over 3 forward calls.
inline TraceRecord MakeLinearRecord(const std::string& model, int layers) {
  TraceRecord r;
  r.metadata.model_name = model;
  for (int i = 0; i < layers; ++i) {
    LayerTrace l;
    l.name = absl::StrCat("l", i);
    l.full_name = l.name;
    l.type = "Linear";
    l.latency_ms = l.latency_ms_mean = 0.5 + i;
    l.forward_count = 3;
    r.layers.push_back(l);
  }
  return r;
}

}  // namespace tracetorch::daemon::test_util

#endif  // TRACETORCH_DAEMON_TESTING_RECORDS_H_
