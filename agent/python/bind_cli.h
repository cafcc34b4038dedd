// Python bindings behind the package's `tracetorch.cli`: the commands over trace files
// (view/file_commands.h, library tracetorch_view), printing what the `tracetorch` program prints.
// No argument parsing and no daemon client here: `tracetorch.cli.main()` runs the program itself
// (cli/ is the program's; the extension never links it, tools/check_layers).
//   _inspect(file, filter, json, stdout, stderr, *, stdout_is_tty=False, no_color=False) -> int
//   _summary(file, stdout, stderr, *, ...) -> int
//   _diff(baseline, current, latency_threshold, grad_norm_threshold, std_threshold, json,
//         stdout, stderr, *, ...) -> int
//   _watch(file, interval_s, filter, stdout, stderr, sleep, *, ...) -> int
//       each runs the command in this process, writing through the given Python text streams
//       (their write/flush, so pytest's capsys and redirections see it), in the style the
//       program's --color=auto picks for that terminal, and returns the exit code
//       (view/command_io.h). `_watch` waits between polls with `sleep(seconds)`;
//       KeyboardInterrupt raised by `sleep` ends the watch as Ctrl+C ends the program's.
//   FilterOptions   view::LayerFilter under tracetorch-ml's names (name_pattern, module_type,
//                   min_latency_ms, matches(layer)); `filter` above takes one or None.
//   format_params, format_ms, format_shape, format_bytes   the CLI's number formatting.
//
// REQUIRES: BindRecord ran first (LayerTrace); the GIL is held.
#ifndef TRACETORCH_AGENT_PYTHON_BIND_CLI_H_
#define TRACETORCH_AGENT_PYTHON_BIND_CLI_H_

#include <pybind11/pybind11.h>

namespace tracetorch::python {

void BindCli(pybind11::module_& m);

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_BIND_CLI_H_
