"""TraceSession: trace every module call of a model, in-process.

    with TraceSession(model) as session:
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
    print(session.summary())
    session.export("trace.json")

While a session is active, each child module's ``forward`` (the root's too) is replaced by a thin
wrapper that hands the call's arguments and result to the native engine (``tracetorch._C``), which
flattens the tensors, computes statistics in one fused pass per distinct tensor, times the call and
attaches C++ autograd hooks for the backward pass. Leaving the ``with`` block restores every
``forward`` exactly as it was. Keyword arguments are traced too (torch 1.13's module hooks cannot see
them). The wrapper keeps the original's signature visible to ``inspect`` (``__wrapped__``).

Streaming: with ``daemon=`` (a socket path or ``unix://`` address), or with ``TRACETORCH_DAEMON`` set
in the environment when ``daemon`` is None, every ``with`` block is also streamed live to
``tracetorchd`` as one daemon session (``tracetorch sessions``, ``tracetorch snapshot``). Events go
through a bounded queue drained by one background thread: a hook never waits on the network, a
full queue drops and counts (``record.metadata.extra["dropped_events"]``), a daemon that is absent or
restarts is retried in the background while the session keeps recording embedded, and leaving the
block waits at most about one second for the daemon. ``daemon=False`` never streams.

Guest rules: tracing never raises into the traced code (native failures are counted in the record's
metadata ``hook_errors`` and logged once per cause through the ``tracetorch`` logger), outputs and
gradients are bit-identical to an untraced run, and after ``fork()`` (DataLoader workers) the child
records nothing.
"""

from __future__ import annotations

import atexit
import copy
import functools
import logging
import os
import platform
import time
import weakref
from pathlib import Path
from typing import Any, Optional, Union

import torch

from tracetorch import _C

__all__ = ["TraceSession"]

_MIN_WATCH_INTERVAL_S = 0.1
_DAEMON_ENV = "TRACETORCH_DAEMON"
_CLOSE_WAIT_S = 1.0

_log = logging.getLogger("tracetorch")

# Sessions whose `with` block is open, so that an interpreter exit inside the block still flushes
# the daemon stream (bounded wait) instead of losing the queue.
_open_sessions: "weakref.WeakSet[TraceSession]" = weakref.WeakSet()


@atexit.register
def _close_open_streams() -> None:
    for session in list(_open_sessions):
        try:
            session._engine.close_stream(_CLOSE_WAIT_S)
        except Exception:  # noqa: BLE001 - exiting; never raise from an atexit hook.
            pass


def _resolve_daemon(daemon: Any) -> Optional[str]:
    """The daemon address to stream to, or None. Raises TypeError/ValueError for a bad argument."""
    if daemon is False:
        return None
    if daemon is None:
        return os.environ.get(_DAEMON_ENV) or None
    if daemon is True:
        return os.environ.get(_DAEMON_ENV) or ""  # "": the client's default socket.
    if isinstance(daemon, (str, os.PathLike)):
        address = os.fspath(daemon)
        if not address:
            raise ValueError("daemon must be a non-empty socket path or unix:// address")
        return address
    raise TypeError(
        f"daemon must be a socket path, a unix:// address, True, False or None, "
        f"got {type(daemon).__name__}"
    )


class _TracedForward:
    """The instance-level ``forward`` installed on a traced module.

    A small callable object rather than a closure so that copying the model inside a ``with`` block
    stays correct: ``copy.deepcopy`` gives the copy its own untraced forward (not this wrapper, which
    would run the ORIGINAL module's forward), and pickling stores the untraced forward too.
    """

    __slots__ = ("_pre", "_post", "_abort", "_original", "_module", "_layer_id", "_is_root",
                 "_previous", "__dict__")

    def __init__(self, engine: Any, module: torch.nn.Module, original: Any, layer_id: int,
                 is_root: bool, previous: Any) -> None:
        self._pre = engine.pre
        self._post = engine.post
        self._abort = engine.abort
        self._original = original
        self._module = module
        self._layer_id = layer_id
        self._is_root = is_root
        self._previous = previous  # The module's own instance-level forward, if it had one.
        try:
            functools.update_wrapper(self, original)  # __wrapped__, __name__, __doc__ for inspect.
        except (AttributeError, TypeError):
            self.__wrapped__ = original

    def __call__(self, *args, **kwargs):
        call = self._pre(self._layer_id, self._is_root, args, kwargs)
        try:
            output = self._original(*args, **kwargs)
        except BaseException:
            self._abort(call)
            raise
        self._post(call, output)
        return output

    def __deepcopy__(self, memo):
        new_module = memo.get(id(self._module))
        if self._previous is not None:
            return copy.deepcopy(self._previous, memo)
        if new_module is None:  # The wrapper copied on its own: behave like the original.
            return self._original
        return type(new_module).forward.__get__(new_module)

    def __reduce__(self):
        if self._previous is not None:
            return (_identity, (self._previous,))
        return (_class_forward, (self._module,))


def _identity(value: Any) -> Any:
    return value


def _class_forward(module: torch.nn.Module) -> Any:
    return type(module).forward.__get__(module)


def _direct_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters(recurse=False))


class TraceSession:
    """Traces a model while the ``with`` block runs.

    Args:
        model: the ``torch.nn.Module`` to trace. Child modules are recorded as layers (a model
            without children records the root itself).
        capture_stats: compute mean/std/min/max of every input and output. When False only NaN/Inf
            counts are computed (cheaply), so NaN detection keeps working.
        model_name: recorded in the metadata; defaults to the model's class name.
        thresholds: anomaly thresholds (``tracetorch.Thresholds``, a dict of its fields, or None).
        watch_path: when set, the trace so far is written there every ``watch_interval_s`` seconds
            (atomically), and once more, with anomalies, when the block ends.
        watch_interval_s: at least 0.1.
        daemon: stream each ``with`` block to tracetorchd at this socket path or ``unix://``
            address. None (default): ``$TRACETORCH_DAEMON`` when set, else no streaming. True: the
            default socket. False: never stream.

    Each ``with`` starts a clean trace; entering a session that is already active raises
    RuntimeError. ``record``, ``anomalies``, ``export()`` and ``summary()`` describe the last finished
    block (or, inside the block, the trace so far).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        capture_stats: bool = True,
        model_name: Optional[str] = None,
        thresholds: Any = None,
        watch_path: Optional[Union[str, os.PathLike]] = None,
        watch_interval_s: float = 1.0,
        daemon: Union[str, os.PathLike, bool, None] = None,
    ) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if watch_path is not None and not float(watch_interval_s) >= _MIN_WATCH_INTERVAL_S:
            raise ValueError(
                f"watch_interval_s must be at least {_MIN_WATCH_INTERVAL_S}, got {watch_interval_s}"
            )
        self.model = model
        self.capture_stats = bool(capture_stats)
        self.model_name = model_name or type(model).__name__
        self.watch_path = None if watch_path is None else os.fspath(watch_path)
        self.watch_interval_s = float(watch_interval_s)
        from_env = daemon is None
        self.daemon = _resolve_daemon(daemon)
        self._engine = _C._SessionEngine(
            capture_stats=self.capture_stats, thresholds=thresholds, metadata=self._metadata()
        )
        self._installed: list = []  # (module, had_instance_forward, previous_instance_forward)
        self._active = False
        self._started_at = 0.0
        self._daemon_from_env = from_env
        if self.daemon:
            # Validates the address now (ValueError for a malformed one); the stream itself is
            # opened at each `with`.
            try:
                _C._parse_daemon_address(self.daemon)
            except ValueError as e:
                self._ignore_bad_env(e)

    def _connect_daemon(self) -> None:
        try:
            self._engine.connect_daemon(self.daemon, self._metadata())
        except ValueError as e:
            self._ignore_bad_env(e)

    def _ignore_bad_env(self, error: ValueError) -> None:
        if not self._daemon_from_env:
            raise error
        # A bad $TRACETORCH_DAEMON must not break a training script: trace embedded only.
        _log.warning("tracetorch: ignoring %s=%r: %s", _DAEMON_ENV, self.daemon, error)
        self.daemon = None

    # ---- context manager -----------------------------------------------------------------------

    def __enter__(self) -> "TraceSession":
        if self._active:
            raise RuntimeError("this TraceSession is already active; leave its `with` block first")
        self._engine.set_metadata(self._metadata())
        if self.daemon is not None:
            self._connect_daemon()
        self._engine.start()
        try:
            self._install()
            if self.watch_path is not None:
                self._engine.start_watch(self.watch_path, self.watch_interval_s)
        except BaseException:
            self._uninstall()
            self._engine.finish(None)
            raise
        self._active = True
        self._started_at = time.perf_counter()
        _open_sessions.add(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        total_ms = (time.perf_counter() - self._started_at) * 1000.0
        self._active = False
        _open_sessions.discard(self)
        self._uninstall()
        self._engine.finish(total_ms)
        return False

    # ---- results -------------------------------------------------------------------------------

    @property
    def record(self) -> "_C.TraceRecord":
        """The trace (a ``tracetorch.TraceRecord``), with its anomalies once the block has ended."""
        return self._engine.record()

    @property
    def anomalies(self) -> list:
        """The anomalies of the trace (``tracetorch.Anomaly`` list)."""
        return self._engine.anomalies()

    @property
    def hook_errors(self) -> int:
        return self._engine.hook_errors

    @property
    def steps(self) -> int:
        """Forward passes of the root model in the current (or last) block."""
        return self._engine.steps

    @property
    def daemon_stats(self) -> Optional[dict]:
        """The daemon stream's counters (connected, session_id, enqueued/sent/dropped events,
        connects, connect_failures, last_error) for the current or last block; None if it never
        streamed."""
        return self._engine.daemon_stats()

    def export(self, path: Union[str, os.PathLike]) -> Path:
        """Writes the trace as JSON (atomically) and returns the path."""
        out = Path(path)
        self._engine.write(os.fspath(out))
        return out

    def summary(self) -> str:
        """A short text report: model, layers, forward passes, parameters, time, anomalies."""
        return self._engine.summary()

    # ---- internals -----------------------------------------------------------------------------

    def _metadata(self) -> dict:
        cuda = torch.cuda.is_available()
        device = "cpu"
        for p in self.model.parameters():
            device = str(p.device)
            break
        return {
            "model_name": self.model_name,
            "pytorch_version": torch.__version__,
            "python_version": platform.python_version(),
            "platform": platform.platform(),
            "cuda_available": cuda,
            "cuda_version": (torch.version.cuda or "N/A") if cuda else "N/A",
            "active_device": device,
        }

    def _install(self) -> None:
        engine = self._engine
        children = [(n, m) for n, m in self.model.named_modules() if n]
        targets = []
        if children:
            targets.append((self.model, -1, True))
            for full_name, module in children:
                layer_id = engine.declare_layer(
                    full_name.rsplit(".", 1)[-1],
                    type(module).__name__,
                    full_name,
                    full_name.count(".") + 1,
                    _direct_params(module),
                )
                targets.append((module, layer_id, False))
        else:
            name = type(self.model).__name__
            layer_id = engine.declare_layer(name, name, name, 0, _direct_params(self.model))
            targets.append((self.model, layer_id, True))
        for module, layer_id, is_root in targets:
            if isinstance(module, torch.jit.ScriptModule):
                continue  # Compiled modules keep their forward; they are traced as a whole.
            had_own = "forward" in module.__dict__
            previous = module.__dict__.get("forward")
            wrapper = _TracedForward(engine, module, module.forward, layer_id, is_root, previous)
            object.__setattr__(module, "forward", wrapper)
            self._installed.append((module, had_own, previous))

    def _uninstall(self) -> None:
        while self._installed:
            module, had_own, previous = self._installed.pop()
            if had_own:
                object.__setattr__(module, "forward", previous)
            else:
                module.__dict__.pop("forward", None)

    def __repr__(self) -> str:
        state = "active" if self._active else "inactive"
        return f"TraceSession(model={self.model_name!r}, {state})"
