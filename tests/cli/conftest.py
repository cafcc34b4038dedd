"""Shared helpers for the end-to-end tests of the `tracetorch` binary.

The binary and the fixtures come from the environment (tests/CMakeLists.txt sets them):
  TRACETORCH_BIN       path of the built `tracetorch`
  TRACETORCH_FIXTURES  tests/fixtures/upstream
"""

import json
import os
import pathlib
import subprocess

import pytest


def _require_env(name):
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set; run these tests through ctest", returncode=2)
    return value


BIN = _require_env("TRACETORCH_BIN")
FIXTURES = pathlib.Path(_require_env("TRACETORCH_FIXTURES"))


def fixture(name):
    return str(FIXTURES / name)


def load_fixture(name):
    with open(FIXTURES / name) as f:
        return json.load(f)


def clean_env(**extra):
    """The environment without NO_COLOR (so tests control it), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(extra)
    return env


NOBODY = 65534


def run(*args, env=None, cwd=None, timeout=60, as_nobody=False):
    """Runs tracetorch with stdout and stderr piped; returns CompletedProcess (text).

    as_nobody: when this test runs as root, the binary runs as nobody (uid and gid 65534, no
    supplementary groups), so that file permissions hold for it as they do for a user."""
    drop = {}
    if as_nobody and os.geteuid() == 0:
        drop = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    return subprocess.run(
        [BIN, *args],
        capture_output=True,
        text=True,
        env=env if env is not None else clean_env(),
        cwd=cwd,
        timeout=timeout,
        **drop,
    )


def parse_plain_tree(output):
    """Parses the plain layer tree of `inspect` into {full_name: line}.

    Each tree line is "<guides><+-- or \\-- ><name> ..."; guides are 4 columns per level. The full
    name is rebuilt from the names of the enclosing lines, so this checks the nesting itself.
    """
    lines = output.splitlines()
    start = lines.index("Layers") + 1
    stack = []
    result = {}
    for line in lines[start:]:
        if not line:
            break
        marker = max(line.find("+-- "), line.find("\\-- "))
        assert marker >= 0 and marker % 4 == 0, f"not a tree line: {line!r}"
        assert set(line[:marker]) <= {" ", "|"}, f"bad guides: {line!r}"
        depth = marker // 4
        name = line[marker + 4 :].split(" ", 1)[0]
        del stack[depth:]
        assert len(stack) == depth, f"line nested under nothing: {line!r}"
        stack.append(name)
        result[".".join(stack)] = line
    return result


@pytest.fixture
def tmp(tmp_path):
    return tmp_path
