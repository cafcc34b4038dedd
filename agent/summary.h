// The text summary of a traced session that both front doors print (Python's
// TraceSession.summary(), C++'s TraceSession::Summary()).
#ifndef TRACETORCH_AGENT_SUMMARY_H_
#define TRACETORCH_AGENT_SUMMARY_H_

#include <cstdint>
#include <string>

#include "trace/record.h"

namespace tracetorch::agent {

// One "Key: value" line each, the tracetorch-ml library's lines first and spelled as it spells
// them, so that scripts reading them keep working:
//   Model: resnet                     (record.metadata.model_name)
//   Layers traced: 11
//   Total parameters: 11.2K
//   Total time: 81.7ms                ("running" while the session is open)
//   Forward passes: 20                (ForwardPasses(record): the root model's calls)
//   Slowest layer: blocks (1.45ms mean / 4.77ms max over 20 fwd)
//   Slowest backward: head (0.120ms mean / 0.300ms max over 20 bwd)      when a backward ran
//   Heaviest fwd mem: fc (+5.00MiB alloc, +8.00MiB reserved); then ...  on CUDA
//   Heaviest bwd mem: fc (+1.00MiB alloc, +2.00MiB reserved)            on CUDA
// then ours: PyTorch, Device, the NaN origin and hook errors when there are any, and the
// anomalies of record.warnings:
//   Anomalies detected: 2
//     ✗ [critical] bad: NaN detected in output (40 values)
// `steps` < 0 means not a live session (a record filled in by hand or read from a file): a missing
// total time then reads 0.000ms, as the library does, rather than "running". Forward passes are
// the record's own (trace/record.h ForwardPasses), so every door and `tracetorch summary` agree.
std::string SessionSummary(const TraceRecord& record, int64_t steps, int64_t hook_errors);

}  // namespace tracetorch::agent

#endif  // TRACETORCH_AGENT_SUMMARY_H_
