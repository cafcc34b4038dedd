// The `tracetorch._C` extension module: the record API (bind_record.h), the analyses
// (bind_analysis.h), the tracing engine (bind_session.h) and the command line (bind_cli.h; only in
// builds with cli/, TRACETORCH_WITH_CLI: an agent-only build without CLI11 has none).
#include <pybind11/pybind11.h>

#include "agent/python/bind_analysis.h"
#ifdef TRACETORCH_WITH_CLI
#include "agent/python/bind_cli.h"
#endif
#include "agent/python/bind_draw.h"
#include "agent/python/bind_ops.h"
#include "agent/python/bind_record.h"
#include "agent/python/bind_session.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "tracetorch native core: trace records, anomaly detection, diff and the tracing engine";
  tracetorch::python::BindRecord(m);
  tracetorch::python::BindAnalysis(m);
  tracetorch::python::BindSession(m);
#ifdef TRACETORCH_WITH_CLI
  tracetorch::python::BindCli(m);
#endif
  tracetorch::python::BindOps(m);
  tracetorch::python::BindDraw(m);
}
