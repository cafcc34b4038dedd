// Python bindings of tracetorch.cli; see bind_cli.h.
#include "agent/python/bind_cli.h"

#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/python/record_convert.h"
#include "trace/format.h"
#include "trace/record.h"
#include "view/command_io.h"
#include "view/file_commands.h"
#include "view/filter.h"

namespace tracetorch::python {
namespace {

// A streambuf that hands what is written to a Python text stream (its write() and flush()) at
// every flush of the std::ostream and whenever 64 KiB have gathered. A Python exception from the
// stream (a closed pipe) fails the std::ostream, as a failed write(2) would, and is kept for the
// caller to raise once the command has returned.
class PyStreamBuf final : public std::streambuf {
 public:
  explicit PyStreamBuf(py::object stream) : stream_(std::move(stream)) {}

  // Raises the stream's exception, if it had one.
  void RethrowError() {
    if (error_.has_value()) {
      py::error_already_set error = std::move(*error_);
      error_.reset();
      throw error;
    }
  }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    pending_.push_back(traits_type::to_char_type(ch));
    if (pending_.size() >= kFlushAt && !Flush()) return traits_type::eof();
    return ch;
  }

  std::streamsize xsputn(const char* s, std::streamsize n) override {
    pending_.append(s, static_cast<size_t>(n));
    if (pending_.size() >= kFlushAt && !Flush()) return 0;
    return n;
  }

  int sync() override { return Flush() ? 0 : -1; }

 private:
  static constexpr size_t kFlushAt = 64 * 1024;

  bool Flush() {
    if (error_.has_value()) return false;
    if (pending_.empty()) return true;
    try {
      // Our output is UTF-8; a stray byte must not lose the rest of it.
      py::object text = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
          pending_.data(), static_cast<Py_ssize_t>(pending_.size()), "replace"));
      if (!text) throw py::error_already_set();
      pending_.clear();
      stream_.attr("write")(text);
      stream_.attr("flush")();
    } catch (py::error_already_set& e) {
      pending_.clear();
      error_ = std::move(e);
      return false;
    }
    return true;
  }

  py::object stream_;
  std::string pending_;
  std::optional<py::error_already_set> error_;
};

// Runs `command` with an environment whose streams write to the Python text streams `out` and
// `err`; raises what a stream raised (a closed pipe) once the command has returned.
template <typename Command>
int RunWithStreams(const py::object& out, const py::object& err, const py::object& sleep,
                   bool stdout_is_tty, bool no_color, Command command) {
  PyStreamBuf out_buf(out);
  PyStreamBuf err_buf(err);
  std::ostream out_stream(&out_buf);
  std::ostream err_stream(&err_buf);
  view::CliEnvironment env{
      .out = &out_stream,
      .err = &err_stream,
      .stdout_is_tty = stdout_is_tty,
      .no_color = no_color,
      .wait = {},
  };
  if (!sleep.is_none()) {
    env.wait = [&sleep](absl::Duration timeout) {
      try {
        sleep(absl::ToDoubleSeconds(timeout));
      } catch (py::error_already_set& e) {
        if (e.matches(PyExc_KeyboardInterrupt)) return false;  // Ctrl+C: stop watching.
        throw;
      }
      return true;
    };
  }
  const int code = command(view::ChooseStyle("auto", stdout_is_tty, no_color), env);
  out_stream.flush();
  err_stream.flush();
  out_buf.RethrowError();
  err_buf.RethrowError();
  return code;
}

view::LayerFilter FilterOrAll(const std::optional<view::LayerFilter>& filter) {
  return filter.value_or(view::LayerFilter{});
}

// The commands over trace files (view/file_commands.h), each with the streams to print on.
void BindFileCommands(py::module_& m) {
  m.def(
      "_inspect",
      [](const std::string& file, std::optional<view::LayerFilter> filter, bool json,
         const py::object& out, const py::object& err, bool stdout_is_tty, bool no_color) {
        return RunWithStreams(out, err, py::none(), stdout_is_tty, no_color,
                              [&](const view::Style& style, const view::CliEnvironment& env) {
                                return view::RunInspect(
                                    {.file = file, .filter = FilterOrAll(filter), .json = json},
                                    style, env);
                              });
      },
      py::arg("file"), py::arg("filter"), py::arg("json"), py::arg("stdout"), py::arg("stderr"),
      py::kw_only(), py::arg("stdout_is_tty") = false, py::arg("no_color") = false,
      "`tracetorch inspect FILE`; returns the exit code.");
  m.def(
      "_summary",
      [](const std::string& file, const py::object& out, const py::object& err, bool stdout_is_tty,
         bool no_color) {
        return RunWithStreams(out, err, py::none(), stdout_is_tty, no_color,
                              [&](const view::Style& style, const view::CliEnvironment& env) {
                                return view::RunSummary({.file = file}, style, env);
                              });
      },
      py::arg("file"), py::arg("stdout"), py::arg("stderr"), py::kw_only(),
      py::arg("stdout_is_tty") = false, py::arg("no_color") = false,
      "`tracetorch summary FILE`; returns the exit code.");
  m.def(
      "_diff",
      [](const std::string& baseline, const std::string& current, double latency, double grad_norm,
         double std, bool json, const py::object& out, const py::object& err, bool stdout_is_tty,
         bool no_color) {
        return RunWithStreams(
            out, err, py::none(), stdout_is_tty, no_color,
            [&](const view::Style& style, const view::CliEnvironment& env) {
              return view::RunDiff(
                  {.baseline = baseline,
                   .current = current,
                   .thresholds = {.latency = latency, .grad_norm = grad_norm, .std = std},
                   .json = json},
                  style, env);
            });
      },
      py::arg("baseline"), py::arg("current"), py::arg("latency_threshold"),
      py::arg("grad_norm_threshold"), py::arg("std_threshold"), py::arg("json"), py::arg("stdout"),
      py::arg("stderr"), py::kw_only(), py::arg("stdout_is_tty") = false,
      py::arg("no_color") = false, "`tracetorch diff BASELINE CURRENT`; returns the exit code.");
  m.def(
      "_watch",
      [](const std::string& file, double interval_s, std::optional<view::LayerFilter> filter,
         const py::object& out, const py::object& err, const py::object& sleep, bool stdout_is_tty,
         bool no_color) {
        return RunWithStreams(
            out, err, sleep, stdout_is_tty, no_color,
            [&](const view::Style& style, const view::CliEnvironment& env) {
              return view::RunWatchFile(
                  {.file = file, .filter = FilterOrAll(filter), .interval_s = interval_s}, style,
                  env);
            });
      },
      py::arg("file"), py::arg("interval_s"), py::arg("filter"), py::arg("stdout"),
      py::arg("stderr"), py::arg("sleep"), py::kw_only(), py::arg("stdout_is_tty") = false,
      py::arg("no_color") = false,
      "`tracetorch watch FILE`, waiting with sleep(seconds) between polls until it raises "
      "KeyboardInterrupt; returns the exit code.");
}

std::optional<std::string> NoneIfEmpty(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

void BindFilterOptions(py::module_& m) {
  py::class_<view::LayerFilter> cls(m, "FilterOptions", R"doc(
The layer selection of `tracetorch inspect` and `watch` (--filter, --type, --min-latency), under
tracetorch-ml's names. Unset criteria (None) match every layer; set ones combine with AND:

  name_pattern    fnmatch glob on full_name ('*' also matches '.'): "blocks.*"
  module_type     exact class name: "Linear"
  min_latency_ms  latency_ms_mean (latency_ms when the mean is unknown) >= this; a layer without
                  any latency does not match

    FilterOptions(name_pattern="enc*", module_type="Linear").matches(layer)
)doc");
  cls.def(
         py::init([](std::optional<std::string> name_pattern,
                     std::optional<std::string> module_type, std::optional<double> min_latency_ms) {
           return view::LayerFilter{.name_glob = name_pattern.value_or(""),
                                    .type = module_type.value_or(""),
                                    .min_latency_ms = min_latency_ms};
         }),
         py::arg("name_pattern") = py::none(), py::arg("module_type") = py::none(),
         py::arg("min_latency_ms") = py::none())
      .def_property(
          "name_pattern", [](const view::LayerFilter& f) { return NoneIfEmpty(f.name_glob); },
          [](view::LayerFilter& f, std::optional<std::string> v) { f.name_glob = v.value_or(""); })
      .def_property(
          "module_type", [](const view::LayerFilter& f) { return NoneIfEmpty(f.type); },
          [](view::LayerFilter& f, std::optional<std::string> v) { f.type = v.value_or(""); })
      .def_readwrite("min_latency_ms", &view::LayerFilter::min_latency_ms, "float | None")
      .def("matches", &view::LayerFilter::Matches, py::arg("layer"),
           "Whether `layer` (a LayerTrace) passes every set criterion.")
      .def(
          "__eq__",
          [](const view::LayerFilter& a, const view::LayerFilter& b) {
            return a.name_glob == b.name_glob && a.type == b.type &&
                   a.min_latency_ms == b.min_latency_ms;
          },
          py::is_operator())
      .def("__repr__", [](const view::LayerFilter& f) {
        return absl::StrCat("FilterOptions(name_pattern=", Repr(py::cast(NoneIfEmpty(f.name_glob))),
                            ", module_type=", Repr(py::cast(NoneIfEmpty(f.type))),
                            ", min_latency_ms=", OptRepr(f.min_latency_ms), ")");
      });
}

// The formatters of the CLI's text (trace/format.h), under tracetorch-ml's names.
void BindFormatters(py::module_& m) {
  m.def("format_params", &FormatCount, py::arg("count"),
        "650 -> '650', 2112 -> '2.1K', 1.8e6 -> '1.8M'.");
  m.def("format_ms", &FormatMs, py::arg("ms"),
        "0.0346 -> '0.035ms', 4.081 -> '4.08ms', 81.7 -> '81.7ms'.");
  m.def("format_shape", &FormatShape, py::arg("shape"), "[16, 64] -> '[16, 64]'.");
  m.def(
      "format_bytes",
      [](std::optional<double> bytes) -> std::string {
        if (!bytes) return "-";
        if (!std::isfinite(*bytes) || std::fabs(*bytes) >= 9.2e18) return FormatFixed(*bytes, 0);
        return FormatBytes(std::llround(*bytes));
      },
      py::arg("num_bytes"),
      "512 -> '512B', 2048 -> '2.0KiB', -1.5 MiB -> '-1.50MiB'; None -> '-'.");
}

}  // namespace

void BindCli(py::module_& m) {
  BindFilterOptions(m);
  BindFormatters(m);
  BindFileCommands(m);
}

}  // namespace tracetorch::python
