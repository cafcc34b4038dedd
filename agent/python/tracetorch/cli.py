"""The ``tracetorch`` command, in Python (the tracetorch-ml library's ``tracetorch.cli``).

    from tracetorch.cli import FilterOptions, inspect_command
    inspect_command("trace.json", filter_opts=FilterOptions(module_type="Linear"))

    python -m tracetorch inspect trace.json --type Linear     # or the `tracetorch` console script

``inspect_command``, ``summary_command``, ``diff_command`` and ``watch_command`` run the commands
of the ``tracetorch`` program over trace files (their C++ code, linked into ``tracetorch._C``) in
this process, printing through ``sys.stdout`` / ``sys.stderr``: the same text, the same JSON, the
same exit codes (0 ok; 1 ``diff`` found a regression; 2 an invalid argument or an unreadable
file, with one line on stderr). A command that does not succeed raises ``SystemExit`` with its exit
code; ``watch_command`` waits with ``time.sleep`` and stops, exit code 0, on ``KeyboardInterrupt``
(Ctrl+C).

``main()`` (the console script and ``python -m tracetorch``) is the program itself: it replaces
this process with the ``tracetorch`` program and its command line, every subcommand included (the
daemon ones, ``sessions``, ``snapshot``, ``baseline``, ``diff --remote``, ``watch --remote``,
``report``, ``export``, ``forensics``, among them), the first of: ``$TRACETORCH_BIN``; the one
installed with this package (``tracetorch/_bin/``, also in a CMake build tree's ``build/python``);
a native ``tracetorch`` program on ``PATH`` (not the console script that runs this module). The
training process never carries the command line (argument parsing, the daemon client): only the
views it prints with.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from tracetorch import _C
from tracetorch._C import FilterOptions

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


def _terminal() -> dict:
    """What the program would learn of its terminal: is stdout one, is NO_COLOR set."""
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return {"stdout_is_tty": tty, "no_color": bool(os.environ.get("NO_COLOR"))}


def _exit_unless_ok(code: int) -> None:
    if code != 0:
        raise SystemExit(code)


def inspect_command(trace_path: str, *, filter_opts: Optional[FilterOptions] = None,
                    json_output: bool = False) -> None:
    """``tracetorch inspect``: the summary panel, the layer tree and the anomalies (or, with
    ``json_output``, the filtered record as JSON)."""
    _exit_unless_ok(_C._inspect(os.fspath(trace_path), filter_opts, bool(json_output),
                                sys.stdout, sys.stderr, **_terminal()))


def summary_command(trace_path: str) -> None:
    """``tracetorch summary``: the summary panel and the anomaly counts."""
    _exit_unless_ok(_C._summary(os.fspath(trace_path), sys.stdout, sys.stderr, **_terminal()))


def watch_command(trace_path: str, *, interval: float = 0.5,
                  filter_opts: Optional[FilterOptions] = None) -> None:
    """``tracetorch watch``: re-renders the file's view whenever it changes, every ``interval``
    seconds, until Ctrl+C ("Stopped watching.")."""
    _exit_unless_ok(_C._watch(os.fspath(trace_path), float(interval), filter_opts, sys.stdout,
                              sys.stderr, _sleep, **_terminal()))


def diff_command(baseline_path: str, current_path: str, *, latency_threshold: float = 0.1,
                 grad_norm_threshold: float = 0.25, std_threshold: float = 0.25,
                 json_output: bool = False) -> None:
    """``tracetorch diff``: the table (or JSON) of changes; ``SystemExit(1)`` when a warning or
    critical entry was found."""
    _exit_unless_ok(_C._diff(os.fspath(baseline_path), os.fspath(current_path),
                             float(latency_threshold), float(grad_norm_threshold),
                             float(std_threshold), bool(json_output), sys.stdout, sys.stderr,
                             **_terminal()))


def _is_native_program(path: str) -> bool:
    """Whether ``path`` is an executable ELF file: the C++ program, not a Python entry point
    (pip's ``tracetorch`` console script runs this module, which would run itself again)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF" and os.access(path, os.X_OK)
    except OSError:
        return False


def _program() -> Optional[str]:
    """The ``tracetorch`` program, or None: $TRACETORCH_BIN, else the one beside this package
    (``_bin/``: installed, or linked there by a CMake build), else a native ``tracetorch`` on
    PATH."""
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


def main(argv: Optional[Sequence[str]] = None) -> None:
    """The ``tracetorch`` console script and ``python -m tracetorch``: replaces this process with
    the ``tracetorch`` program run with ``argv`` (default ``sys.argv[1:]``), so that it prints,
    waits and exits as the program does. Without the program, one line on stderr and exit code 2.
    """
    args = [os.fspath(a) for a in (sys.argv[1:] if argv is None else argv)]
    program = _program()
    if program is None:
        sys.stderr.write(
            f"tracetorch: the command line needs the tracetorch program: none beside this "
            f"package ({Path(__file__).resolve().parent / '_bin'}) nor on PATH; build it with "
            f"CMake (build/cli/tracetorch), put it on PATH, or set {_BIN_ENV} to its path (in "
            f"Python, tracetorch.cli.inspect_command and its siblings run without it)\n")
        raise SystemExit(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(program, [program, *args])


if __name__ == "__main__":
    main()
