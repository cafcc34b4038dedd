"""TraceSession's `daemon=` option without a daemon: validation, the environment, and a daemon that
is absent (the session runs embedded and leaving the block stays bounded)."""

from __future__ import annotations

import logging
import time

import pytest
import torch


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())


def test_bad_daemon_argument_raises():
    import tracetorch

    with pytest.raises(TypeError):
        tracetorch.TraceSession(_model(), daemon=3)
    with pytest.raises(ValueError):
        tracetorch.TraceSession(_model(), daemon="tcp://127.0.0.1:1")
    with pytest.raises(ValueError):
        tracetorch.TraceSession(_model(), daemon="")


def test_bad_environment_is_ignored_with_a_warning(monkeypatch, caplog):
    import tracetorch

    monkeypatch.setenv("TRACETORCH_DAEMON", "tcp://127.0.0.1:1")
    with caplog.at_level(logging.WARNING, logger="tracetorch"):
        s = tracetorch.TraceSession(_model())
    assert s.daemon is None
    assert "TRACETORCH_DAEMON" in caplog.text
    with s:
        s.model(torch.randn(2, 4))
    assert s.daemon_stats is None
    assert "dropped_events" not in s.record.metadata.extra


def test_false_never_streams_even_with_the_environment(monkeypatch, tmp_path):
    import tracetorch

    monkeypatch.setenv("TRACETORCH_DAEMON", str(tmp_path / "d.sock"))
    s = tracetorch.TraceSession(_model(), daemon=False)
    with s:
        s.model(torch.randn(2, 4))
    assert s.daemon is None and s.daemon_stats is None


def test_absent_daemon_runs_embedded_and_exit_is_bounded(tmp_path):
    import tracetorch

    model = _model()
    s = tracetorch.TraceSession(model, daemon=f"unix://{tmp_path}/absent.sock")
    start = time.monotonic()
    with s:
        for _ in range(5):
            model(torch.randn(2, 4)).sum().backward()
    assert time.monotonic() - start < 3.0  # ~1 s bounded flush at exit, never a hang.
    assert s.record.find_layer("0").forward_count == 5
    stats = s.daemon_stats
    assert stats["connected"] is False and stats["session_id"] == ""
    assert stats["enqueued_events"] == 20
    assert stats["dropped_events"] == 20  # Never sent: counted, and in the record.
    assert s.record.metadata.extra["dropped_events"] == 20
