"""The ``tracetorch`` command, in Python (the tracetorch-ml library's ``tracetorch.cli``).

    from tracetorch.cli import FilterOptions, inspect_command
    inspect_command("trace.json", filter_opts=FilterOptions(module_type="Linear"))

    python -m tracetorch inspect trace.json --type Linear     # or the `tracetorch` console script

Every function runs the command line of the ``tracetorch`` program itself (its C++ code, linked
into ``tracetorch._C``) in this process, printing through ``sys.stdout`` / ``sys.stderr``: the same
text, the same JSON, the same exit codes (0 ok; 1 ``diff`` found a regression; 2 a usage error or
an unreadable file, with one line on stderr). A command that does not succeed raises
``SystemExit`` with its exit code; ``watch_command`` waits with ``time.sleep`` and stops, exit
code 0, on ``KeyboardInterrupt`` (Ctrl+C).

The subcommands that talk to tracetorchd (``sessions``, ``snapshot``, ``baseline``, ``diff --remote``,
``watch --remote``, ``report --remote``, ``export --remote``) need the daemon client, which the
extension leaves out (no gRPC in a training process): ``main()`` runs the ``tracetorch`` program for
them, the first of: ``$TRACETORCH_BIN``; the one installed with this package (``tracetorch/_bin/``,
also in a CMake build tree's ``build/python``); a native ``tracetorch`` program on ``PATH`` (not the
console script that runs this module).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from tracetorch import _C

if not hasattr(_C, "_run_cli"):
    raise ImportError(
        "tracetorch.cli: this tracetorch was built without the command line (an agent-only build "
        "without CLI11); tracing (import tracetorch) works without it. Install CLI11 (Debian/"
        "Ubuntu: libcli11-dev) and reinstall tracetorch for tracetorch.cli and python -m tracetorch.")

from tracetorch._C import FilterOptions  # noqa: E402 (after the check above)

__all__ = [
    "FilterOptions",
    "diff_command",
    "inspect_command",
    "main",
    "summary_command",
    "watch_command",
]

_BIN_ENV = "TRACETORCH_BIN"


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # Looked up at each call: tests patch tracetorch.cli.time.sleep.


def _run(argv: Sequence[str]) -> int:
    """Runs ``tracetorch ARGV...`` in this process and returns the exit code (or the
    daemon-client marker)."""
    no_color = bool(os.environ.get("NO_COLOR"))
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return _C._run_cli([os.fspath(a) for a in argv], sys.stdout, sys.stderr, _sleep,
                       stdout_is_tty=tty, no_color=no_color)


def _command(argv: Sequence[str]) -> None:
    code = _run(argv)
    if code == _C._NEEDS_DAEMON_CLIENT:
        code = _exec_program(argv)
    if code != 0:
        raise SystemExit(code)


def _filter_args(opts: Optional[FilterOptions]) -> list:
    if opts is None:
        return []
    args = []
    if opts.name_pattern is not None:
        args += ["--filter", opts.name_pattern]
    if opts.module_type is not None:
        args += ["--type", opts.module_type]
    if opts.min_latency_ms is not None:
        args += ["--min-latency", repr(float(opts.min_latency_ms))]
    return args


def inspect_command(trace_path: str, *, filter_opts: Optional[FilterOptions] = None,
                    json_output: bool = False) -> None:
    """``tracetorch inspect``: the summary panel, the layer tree and the anomalies (or, with
    ``json_output``, the filtered record as JSON)."""
    _command(["inspect", trace_path, *_filter_args(filter_opts)]
             + (["--json"] if json_output else []))


def summary_command(trace_path: str) -> None:
    """``tracetorch summary``: the summary panel and the anomaly counts."""
    _command(["summary", trace_path])


def watch_command(trace_path: str, *, interval: float = 0.5,
                  filter_opts: Optional[FilterOptions] = None) -> None:
    """``tracetorch watch``: re-renders the file's view whenever it changes, every ``interval``
    seconds, until Ctrl+C ("Stopped watching.")."""
    _command(["watch", trace_path, "--interval", repr(float(interval)),
              *_filter_args(filter_opts)])


def diff_command(baseline_path: str, current_path: str, *, latency_threshold: float = 0.1,
                 grad_norm_threshold: float = 0.25, std_threshold: float = 0.25,
                 json_output: bool = False) -> None:
    """``tracetorch diff``: the table (or JSON) of changes; ``SystemExit(1)`` when a warning or
    critical entry was found."""
    _command(["diff", baseline_path, current_path,
              "--latency-threshold", repr(float(latency_threshold)),
              "--grad-norm-threshold", repr(float(grad_norm_threshold)),
              "--std-threshold", repr(float(std_threshold))]
             + (["--json"] if json_output else []))


def _is_native_program(path: str) -> bool:
    """Whether ``path`` is an executable ELF file: the C++ program, not a Python entry point
    (pip's ``tracetorch`` console script runs this module, which would run itself again)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF" and os.access(path, os.X_OK)
    except OSError:
        return False


def _program() -> Optional[str]:
    """The ``tracetorch`` program to run the daemon subcommands with, or None: $TRACETORCH_BIN,
    else the one beside this package (``_bin/``: installed, or linked there by a CMake build),
    else a native ``tracetorch`` on PATH."""
    configured = os.environ.get(_BIN_ENV)
    if configured:
        return configured
    bundled = os.fspath(Path(__file__).resolve().parent / "_bin" / "tracetorch")
    if _is_native_program(bundled):
        return bundled
    on_path = shutil.which("tracetorch")
    if on_path and _is_native_program(on_path):
        return on_path
    return None


def _exec_program(argv: Sequence[str]) -> int:
    program = _program()
    if program is None:
        sys.stderr.write(
            f"tracetorch: '{argv[0] if argv else ''}' talks to tracetorchd and needs the tracetorch "
            f"program: none beside this package ({Path(__file__).resolve().parent / '_bin'}) nor "
            f"on PATH; build it with CMake (build/cli/tracetorch), put it on PATH, or set "
            f"{_BIN_ENV} to its path\n")
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(program, [program, *[os.fspath(a) for a in argv]])
    return 2  # Not reached.


def main(argv: Optional[Sequence[str]] = None) -> None:
    """The ``tracetorch`` console script and ``python -m tracetorch``: the command with ``argv``
    (default ``sys.argv[1:]``); exits with its exit code."""
    _command(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
