"""Shared pytest fixtures for the tracetorch Python package tests.

Run against a build tree:
    PYTHONPATH=<build-dir>/python /usr/bin/python3 -m pytest agent/python/tests

`tracetorch` is imported inside the fixtures, not here, so that a broken import shows up as the
failure of the tests that need it rather than as a collection error of every file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import traceback
from pathlib import Path

import pytest

# agent/python/tests/conftest.py -> the repository root is three levels up.
REPO_ROOT = Path(__file__).resolve().parents[3]
UPSTREAM_DIR = REPO_ROOT / "tests" / "fixtures" / "upstream"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    """tests/fixtures/upstream: files written by the tracetorch-ml library (see its README.md)."""
    assert UPSTREAM_DIR.is_dir(), f"missing fixtures: {UPSTREAM_DIR}"
    return UPSTREAM_DIR


@pytest.fixture
def load_upstream(upstream_dir):
    """load_upstream("train_trace.json") -> (TraceRecord, the file's json.load() dict)."""
    from tracetorch.storage import load_json

    def load(name: str):
        path = upstream_dir / name
        with path.open(encoding="utf-8") as f:
            raw = json.load(f)
        return load_json(path), raw

    return load


@pytest.fixture
def train_record(load_upstream):
    return load_upstream("train_trace.json")[0]


@pytest.fixture
def perturbed_record(load_upstream):
    return load_upstream("train_trace_perturbed.json")[0]


# ---- unprivileged checks -------------------------------------------------------------------------

NOBODY = 65534


def _run_unprivileged(fn) -> None:
    """Runs fn() as an unprivileged user; a failure inside it fails the calling test.

    Root (as in CI) ignores file and directory permissions, so as root fn runs in a forked child
    that first drops to nobody (65534); a child that cannot drop fails too, so the check never
    passes vacuously. Not root: fn runs here.
    """
    if os.geteuid() != 0:
        fn()
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # The child: never returns into pytest.
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            fn()
            code = 0
        except BaseException:  # noqa: BLE001 - reported to the parent through the pipe.
            os.write(write_end, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        report = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (
        report or f"unprivileged child ended with status {status}")


@pytest.fixture
def unprivileged():
    """unprivileged(fn): runs fn() as an unprivileged user (see _run_unprivileged)."""
    return _run_unprivileged


@pytest.fixture
def unprivileged_dir():
    """An empty directory the unprivileged user owns (pytest's tmp_path is closed to it)."""
    path = Path(tempfile.mkdtemp(prefix="tt-unpriv-", dir="/tmp"))
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    yield path
    for root, dirs, _ in os.walk(path):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o700)
    shutil.rmtree(path, ignore_errors=True)
