"""Waiting in tests: call a function until it answers, or fail saying what was awaited."""

from __future__ import annotations

import time

import pytest


def poll(fn, timeout, what, interval=0.02):
    """Calls fn() every `interval` seconds until it returns a truthy value, and returns it; fails
    the test after `timeout` seconds naming `what` (a string, or a callable that makes one then)
    and fn's last answer."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    what = what() if callable(what) else what
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
