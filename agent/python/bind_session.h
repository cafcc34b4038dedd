// Python binding of the tracing engine (agent/tracer.h) for `tracetorch.TraceSession`.
//
// BindSession registers on `m`:
//   _SessionEngine(capture_stats: bool, thresholds: Thresholds | dict | None, metadata: dict)
//     declare_layer(name, type, full_name, depth, params) -> int
//     start(); finish(total_time_ms) (stops, closes the daemon stream with a ~1 s bounded wait,
//       finalises with anomalies, final watch flush)
//     connect_daemon(address, metadata): stream the next start()..finish() block to tracetorchd
//       (agent/daemon_sink.h); never waits for the daemon; ValueError for a malformed address
//     close_stream(wait_s=1.0, total_time_ms=None) -> bool; daemon_stats() -> dict | None
//     A streamed block's record carries metadata.extra["dropped_events"].
//     start_watch(path, interval_s); stop_watch()
//     pre(layer_id, is_root, args: tuple, kwargs: dict) -> int     (hot path)
//     post(call_id, output) -> None                                (hot path)
//     abort(call_id) -> None
//     record() -> TraceRecord; anomalies() -> list[Anomaly]; record_json(indent) -> str
//     write(path) -> None; summary() -> str; active, steps, hook_errors properties
// pre/post flatten tensors nested in tuples, lists and dicts (and keyword arguments) in C++; they
// never raise: failures are counted in hook_errors and logged once per cause.
// TRACETORCH_DEFERRED_STATS=1 in the environment when an engine is made routes its CPU samples
// through the deferred-collection queue (TracerOptions::deferred_cpu), as CUDA samples go.
//
// REQUIRES: BindRecord(m) was called first (records and anomalies are returned as its types).
#ifndef TRACETORCH_AGENT_PYTHON_BIND_SESSION_H_
#define TRACETORCH_AGENT_PYTHON_BIND_SESSION_H_

#include <pybind11/pybind11.h>

namespace tracetorch::python {

void BindSession(pybind11::module_& m);

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_BIND_SESSION_H_
