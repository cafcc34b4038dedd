"""`python -m tracetorch sessions` finds the `tracetorch` program the way a user expects: beside the
package (installed, or in a CMake build tree's build/python), else on PATH, with TRACETORCH_BIN as
an override; never pip's console script (which runs this module again)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tracetorch

PACKAGE = Path(tracetorch.__file__).resolve().parent
PROGRAM = os.environ.get("TRACETORCH_BIN")
# Nothing listens here: the program answers exit 2 "cannot reach tracetorchd", which proves it ran.
NOWHERE = "/nonexistent/tracetorch-test/tracetorchd.sock"

pytestmark = pytest.mark.skipif(not PROGRAM, reason="TRACETORCH_BIN not set (run via ctest)")


def _run(pythonpath: Path, path_dirs: list, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TRACETORCH_BIN", "TRACETORCH_DAEMON")}
    env["PYTHONPATH"] = os.fspath(pythonpath)
    env["PATH"] = os.pathsep.join([os.fspath(d) for d in path_dirs] + ["/usr/bin", "/bin"])
    return subprocess.run([sys.executable, "-m", "tracetorch", "sessions", "--remote", NOWHERE],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def _package_copy(tmp_path: Path) -> Path:
    """The package without _bin/, as a source checkout's agent/python/tracetorch + _C would be."""
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / "tracetorch", ignore=shutil.ignore_patterns("_bin"))
    return root


@pytest.mark.skipif(os.environ.get("TRACETORCH_AGENT_ONLY_PACKAGE") == "1",
                    reason="an agent-only build (the wheel's) bundles no program: the next tests "
                           "find it on PATH")
def test_the_build_trees_package_finds_the_program_beside_it(tmp_path):
    assert (PACKAGE / "_bin" / "tracetorch").exists(), "the build links the program into _bin/"
    r = _run(PACKAGE.parent, [], tmp_path)
    assert r.returncode == 2, r.stderr
    assert "cannot reach tracetorchd" in r.stderr and "needs the tracetorch program" not in r.stderr


def test_a_program_on_path_is_found(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "tracetorch").symlink_to(PROGRAM)
    r = _run(_package_copy(tmp_path), [bindir], tmp_path)
    assert r.returncode == 2, r.stderr
    assert "cannot reach tracetorchd" in r.stderr


def test_the_console_script_on_path_is_not_taken_for_the_program(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "tracetorch"  # What pip installs: a Python script running tracetorch.cli.
    script.write_text(f"#!{sys.executable}\nfrom tracetorch.cli import main\nmain()\n")
    script.chmod(0o755)
    r = _run(_package_copy(tmp_path), [bindir], tmp_path)
    assert r.returncode == 2
    assert "needs the tracetorch program" in r.stderr
    assert "TRACETORCH_BIN" in r.stderr and "PATH" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
