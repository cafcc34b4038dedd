// The `tracetorch._C` extension module: the record API (bind_record.h), the analyses
// (bind_analysis.h), the tracing engine (bind_session.h), the commands over trace files behind
// tracetorch.cli (bind_cli.h), op graphs (bind_ops.h) and their pictures (bind_draw.h).
#include <pybind11/pybind11.h>

#include "agent/python/bind_analysis.h"
#include "agent/python/bind_cli.h"
#include "agent/python/bind_draw.h"
#include "agent/python/bind_ops.h"
#include "agent/python/bind_record.h"
#include "agent/python/bind_session.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "tracetorch native core: trace records, anomaly detection, diff and the tracing engine";
  tracetorch::python::BindRecord(m);
  tracetorch::python::BindAnalysis(m);
  tracetorch::python::BindSession(m);
  tracetorch::python::BindCli(m);
  tracetorch::python::BindOps(m);
  tracetorch::python::BindDraw(m);
}
