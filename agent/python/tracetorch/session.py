"""TraceSession: trace every module call of a model, in-process.

    with TraceSession(model) as session:
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
    print(session.summary())
    session.export("trace.json")

While a session is active its HookManager (tracetorch.hooks) intercepts every module call and
hands it to the native engine (``tracetorch._C``); leaving the ``with`` block restores every
``forward`` exactly as it was.

Streaming: with ``daemon=`` (a socket path or ``unix://`` address), or with ``TRACETORCH_DAEMON`` set
in the environment when ``daemon`` is None, every ``with`` block is also streamed live to
``tracetorchd`` as one daemon session (``tracetorch sessions``, ``tracetorch snapshot``). Events go
through a bounded queue drained by one background thread: a hook never waits on the network, a
full queue drops and counts (``record.metadata.extra["dropped_events"]``), a daemon that is absent or
restarts is retried in the background while the session keeps recording embedded, and leaving the
block waits at most about one second for the daemon. ``daemon=False`` never streams.

Op-level NaN origin: with ``ops="on_nan"`` every step's forward (one call of the root model: what
``steps`` counts) is also recorded operation by operation (``tl.trace``'s engine, no tensors kept,
only NaN/Inf counts per op output) until the FIRST step in which non-finite trouble mattered (a
NaN, or an Inf outside a mask that reached a module's or the model's output: an attention mask's
-inf that softmax absorbs does not stop it). That step's op graph is kept in the record
(``record.op_graph``, the JSON document ``tl.load`` reads; exported as the record's ``"op_graph"``
member) and ``record.metadata.nan_origin`` names the op where it entered: ``op`` (its label),
``op_func``, ``op_module``. A clean step's graph is dropped when the next step begins; after the
first such step no more ops are recorded (the first origin is what matters). The backward is not
recorded: for a NaN born in a gradient the layer trace names the layer (``nan_origin.backward``)
and the op is the first op of that layer whose forward output held a value the forward absorbed,
when there is one. It works with ``capture_stats=False`` too (the op recorder only ever counts
NaN/Inf).

Guest rules: tracing never raises into the traced code (native failures are counted in the record's
metadata ``hook_errors`` and logged once per cause through the ``tracetorch`` logger), outputs and
gradients are bit-identical to an untraced run, and after ``fork()`` (DataLoader workers) the child
records nothing.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import platform
import time
import weakref
from pathlib import Path
from typing import Any, Optional, Union

import torch

from tracetorch import _C
from tracetorch._C import TraceRecord
from tracetorch.compiled import CompileWatch, has_compiled_modules, warn as _warn_compiled
from tracetorch.hooks import HookManager
from tracetorch.storage import save_json

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


class TraceSession:
    """Traces a model while the ``with`` block runs.

    Args:
        model: the ``torch.nn.Module`` to trace. Child modules are recorded as layers (a model
            without children records the root itself).
        capture_stats: compute mean/std/min/max of every input and output. When False the tensors
            carry no statistics (``stats`` is None) but NaN/Inf values are still counted
            (``TensorInfo.nan_count``), so NaN detection keeps working.
        model_name: recorded in the metadata; defaults to the model's class name.
        thresholds: anomaly thresholds (``tracetorch.Thresholds``, a dict of its fields, or None).
        watch_path: when set, the trace so far is written there every ``watch_interval_s`` seconds
            (atomically), and once more, with anomalies, when the block ends.
        watch_interval_s: seconds between watch writes; below 0.1 it is raised to 0.1 (logged).
        daemon: stream each ``with`` block to tracetorchd at this socket path or ``unix://``
            address. None (default): ``$TRACETORCH_DAEMON`` when set, else no streaming. True: the
            default socket. False: never stream.
        ops: ``"on_nan"`` records each step's ops and keeps the op graph of the first step with a
            NaN/Inf (see the module docstring); ``None`` or ``"off"`` (default): no op recording.
            Anything else is a ValueError.

    Each ``with`` starts a clean trace; entering a session that is already active raises
    RuntimeError. ``record``, ``anomalies``, ``export()`` and ``summary()`` describe the last finished
    block (inside the block: the trace so far). ``record`` is one TraceRecord object for the
    session's life, refilled in place, as the library's is.
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
        ops: Optional[str] = None,
    ) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self._ops = _resolve_ops(ops)
        # The library's attribute names: code and tests written against it read them.
        self._model = model
        self._capture_stats = bool(capture_stats)
        self._model_name = model_name or type(model).__name__
        self._watch_path = None if watch_path is None else Path(watch_path)
        self._watch_interval_s = _watch_interval(watch_interval_s, watch_path is not None)
        self._record = TraceRecord()
        self._anomalies: list = []
        from_env = daemon is None
        self.daemon = _resolve_daemon(daemon)
        self._engine = _C._SessionEngine(
            capture_stats=self._capture_stats, thresholds=thresholds, metadata=self._metadata()
        )
        self._hook_manager = HookManager(model, self._record, capture_stats=self._capture_stats,
                                         engine=self._engine)
        self._active = False
        self._started_at = 0.0
        self._optimizer_hooks: list = []
        self._daemon_from_env = from_env
        # torch.compile'd models: graph breaks counted while a block runs (tracetorch.compiled).
        self._compile_watch = CompileWatch() if has_compiled_modules(model) else None
        if self.daemon:
            # Validates the address now (ValueError for a malformed one); the stream itself is
            # opened at each `with`.
            try:
                _C._parse_daemon_address(self.daemon)
            except ValueError as e:
                self._ignore_bad_env(e)

    # Our public names for the same settings.
    @property
    def model(self) -> torch.nn.Module:
        return self._model

    @property
    def model_name(self) -> str:
        return self._model_name

    @model_name.setter
    def model_name(self, value: str) -> None:
        self._model_name = value

    @property
    def capture_stats(self) -> bool:
        return self._capture_stats

    @property
    def ops(self) -> Optional[str]:
        """``"on_nan"`` or None."""
        return self._ops

    @property
    def ops_stats(self) -> Optional[dict]:
        """With ``ops="on_nan"``: {"recorded_steps", "skipped_steps", "kept_step"} of the current
        or last block (skipped: another op recorder, such as ``tl.trace``, was active on the
        thread); None otherwise."""
        return self._engine.ops_stats()

    @property
    def op_graph(self) -> Any:
        """With ``ops="on_nan"``: the op graph kept at the first step where NaN/Inf trouble
        mattered (or whose backward made it), as a
        ``tracetorch.OpTrace`` (no tensors: what ``tl.load`` gives); None while none was kept."""
        text = self.record.op_graph_json
        if not text:
            return None
        from tracetorch.ops import OpTrace
        return OpTrace(_C._parse_op_graph(text), {}, None, {})

    @property
    def watch_path(self) -> Optional[str]:
        return None if self._watch_path is None else os.fspath(self._watch_path)

    @property
    def watch_interval_s(self) -> float:
        return self._watch_interval_s

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
        self._engine.set_ops(self._model_name, self._ops_root_type(), self._ops_params())
        if self.daemon is not None:
            self._connect_daemon()
        self._engine.start()
        self._anomalies = []
        try:
            self._hook_manager.register()
            if self._watch_path is not None:
                self._engine.start_watch(os.fspath(self._watch_path), self._watch_interval_s)
            self._optimizer_hooks = _optimizer_phase_hooks(self._engine)
        except BaseException:
            self._remove_optimizer_hooks()
            self._hook_manager.unregister()
            self._engine.finish(None)
            raise
        if self._compile_watch is not None:
            self._compile_watch.start()
        self._active = True
        self._started_at = time.perf_counter()
        _open_sessions.add(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        total_ms = (time.perf_counter() - self._started_at) * 1000.0
        self._active = False
        _open_sessions.discard(self)
        self._remove_optimizer_hooks()
        self._hook_manager.unregister()
        self._engine.finish(total_ms)
        self._engine.fill_record(self._record)
        self._anomalies = self._engine.anomalies()
        if self._compile_watch is not None:
            info = self._compile_watch.finish()
            extra = self._record.metadata.extra  # A copy: assigned back.
            extra["torch_compile"] = info
            self._record.metadata.extra = extra
            _warn_compiled(self._model_name, info)
        return False

    def _remove_optimizer_hooks(self) -> None:
        for handle in self._optimizer_hooks:
            handle.remove()
        self._optimizer_hooks = []

    # ---- results -------------------------------------------------------------------------------

    @property
    def record(self) -> TraceRecord:
        """The trace (a ``tracetorch.TraceRecord``), with its anomalies once the block has ended.

        Always the same object (``_record``); inside the block it is refilled with the trace so far
        on each access.
        """
        if self._active:
            self._engine.fill_record(self._record)
        return self._record

    @property
    def anomalies(self) -> list:
        """The anomalies of the trace (``tracetorch.Anomaly`` list); inside the block, those of the
        trace so far."""
        if self._active:
            return self._engine.anomalies()
        return self._anomalies

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
        connects, connect_failures, last_error; resent_events: written again after a reconnect
        because the daemon had not made them durable; durable_events: how far the daemon last said
        the session is on disk; replay_held_events / replay_evicted_events: in the replay buffer
        now / fallen out of it before being acknowledged; refused_handshakes; not_durable_events:
        sent but not acknowledged durable when the block ended) for the current or last block;
        None if it never streamed."""
        return self._engine.daemon_stats()

    def export(self, path: Union[str, os.PathLike]) -> Path:
        """Writes the trace as JSON (atomically, creating missing directories) and returns the
        path. Inside the block: the trace so far, with its anomalies."""
        out = Path(path)
        if self._active:
            out.parent.mkdir(parents=True, exist_ok=True)
            self._engine.write(os.fspath(out))
            return out
        return save_json(self._record, out)

    def summary(self) -> str:
        """A text report: model, layers traced, parameters, time, forward passes, the slowest
        layers, on CUDA the heaviest allocators, and the anomalies (see agent/summary.h).

        Reads ``_record``, ``_model_name`` and ``_anomalies``, so that a session whose record was
        filled in by hand (as the library's tests do) summarises it too.
        """
        engine = getattr(self, "_engine", None)
        if engine is None:  # Made with __new__ and filled in by hand.
            return _C._session_summary(self._record, self._model_name, self._anomalies)
        return _C._session_summary(self.record, self._model_name, self.anomalies,
                                   steps=engine.steps, hook_errors=engine.hook_errors)

    # ---- internals -----------------------------------------------------------------------------

    def _ops_root_type(self) -> Optional[str]:
        return type(self._model).__name__ if self._ops else None

    def _ops_params(self) -> list:
        if not self._ops:
            return []
        out = [(n, p, False) for n, p in self._model.named_parameters()]
        out += [(n, b, True) for n, b in self._model.named_buffers()]
        return out

    def _metadata(self) -> dict:
        cuda = torch.cuda.is_available()
        device = "cpu"
        for p in self._model.parameters():
            device = str(p.device)
            break
        return {
            "model_name": self._model_name,
            "pytorch_version": torch.__version__,
            "python_version": platform.python_version(),
            "platform": platform.platform(),
            "cuda_available": cuda,
            "cuda_version": (torch.version.cuda or "N/A") if cuda else "N/A",
            "active_device": device,
        }

    def __repr__(self) -> str:
        state = "active" if self._active else "inactive"
        return f"TraceSession(model={self._model_name!r}, {state})"


_OPS_MODES = {None: None, "off": None, "on_nan": "on_nan"}


def _optimizer_phase_hooks(engine: Any) -> list:
    """The flight recorder's "optimizer" phase: torch's global optimizer step hooks (torch >= 2.0)
    mark it while the block is active. Older torch has none: the position then stays in the
    backward's phase until the next forward."""
    optim = getattr(torch.optim, "optimizer", None)
    pre = getattr(optim, "register_optimizer_step_pre_hook", None)
    post = getattr(optim, "register_optimizer_step_post_hook", None)
    if pre is None or post is None or not engine.has_flight_recorder:
        return []
    return [pre(lambda *_: engine.mark_phase("optimizer")),
            post(lambda *_: engine.mark_phase("outside"))]


def _resolve_ops(ops: Any) -> Optional[str]:
    if isinstance(ops, str) or ops is None:
        if ops in _OPS_MODES:
            return _OPS_MODES[ops]
    raise ValueError(f'ops must be "on_nan", "off" or None, got {ops!r}')


_clamp_logged = False


def _watch_interval(value: Any, watching: bool) -> float:
    """The library's clamp: below 0.1 s becomes 0.1 s (logged once per process)."""
    global _clamp_logged
    interval = float(value)
    if math.isnan(interval) or (watching and math.isinf(interval)):
        raise ValueError(f"watch_interval_s must be a number of seconds, got {value!r}")
    if interval < _MIN_WATCH_INTERVAL_S:
        if not _clamp_logged:
            _clamp_logged = True
            _log.warning("tracetorch: watch_interval_s=%r is below the minimum; using %s s",
                         value, _MIN_WATCH_INTERVAL_S)
        interval = _MIN_WATCH_INTERVAL_S
    return interval
