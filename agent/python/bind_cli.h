// Python bindings of the `tracetorch` command line (cli/commands.h, library tracetorch_cli_core),
// behind the package's `tracetorch.cli`:
//   _run_cli(argv, stdout, stderr, sleep, stdout_is_tty=False, no_color=False) -> int
//       runs the command with argv (without the program name) in this process, writing through
//       the given Python text streams (their write/flush, so pytest's capsys and redirections see
//       it) and waiting between `watch` polls with `sleep(seconds)`; KeyboardInterrupt raised by
//       `sleep` ends the watch as Ctrl+C ends the program's. Returns the exit code, or
//       _NEEDS_DAEMON_CLIENT for a subcommand that talks to tracetorchd (the extension has no
//       daemon client; the caller runs the `tracetorch` program for it).
//   FilterOptions   cli::LayerFilter under tracetorch-ml's names (name_pattern, module_type,
//                   min_latency_ms, matches(layer)).
//
// REQUIRES: BindRecord ran first (LayerTrace); the GIL is held.
#ifndef TRACETORCH_AGENT_PYTHON_BIND_CLI_H_
#define TRACETORCH_AGENT_PYTHON_BIND_CLI_H_

#include <pybind11/pybind11.h>

namespace tracetorch::python {

void BindCli(pybind11::module_& m);

}  // namespace tracetorch::python

#endif  // TRACETORCH_AGENT_PYTHON_BIND_CLI_H_
