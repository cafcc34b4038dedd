// The text summary of a traced session that both front doors print (Python's
// TraceSession.summary(), C++'s TraceSession::Summary()).
#ifndef TRACETORCH_AGENT_SUMMARY_H_
#define TRACETORCH_AGENT_SUMMARY_H_

#include <cstdint>
#include <string>

#include "trace/record.h"

namespace tracetorch::agent {

// Model, device, layer count, forward passes (`steps`), parameters, execution time ("running"
// until the session ends), the NaN origin and hook errors when there are any, on CUDA the three
// heaviest forward and backward allocators, then the anomalies of `record.warnings`.
std::string SessionSummary(const TraceRecord& record, int64_t steps, int64_t hook_errors);

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_SUMMARY_H_
