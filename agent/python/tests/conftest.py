"""Shared pytest fixtures for the tracetorch Python package tests.

Run against a build tree:
    PYTHONPATH=<build-dir>/python /usr/bin/python3 -m pytest agent/python/tests

`tracetorch` is imported inside the fixtures, not here, so that a broken import shows up as the
failure of the tests that need it rather than as a collection error of every file.
"""

from __future__ import annotations

import json
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
