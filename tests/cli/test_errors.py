"""End-to-end: bad input and usage errors exit 2 with ONE line on stderr naming the file."""

import os
import re
import shutil
import tempfile

import pytest

from conftest import fixture, run

TRAIN = fixture("train_trace.json")


def assert_one_line_error(r, path):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"tracetorch: {path}: "), r.stderr
    return r.stderr[len(f"tracetorch: {path}: ") :].rstrip("\n")


@pytest.mark.parametrize("command", ["inspect", "summary"])
def test_missing_file(command, tmp_path):
    # (watch waits for a missing file instead; see test_watch.py.)
    r = run(command, "nope.json", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr == "tracetorch: nope.json: file not found\n"
    assert r.stdout == ""


def test_corrupt_json_names_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "metadata": {\n    "model_name": "x",,\n  }\n}\n')
    what = assert_one_line_error(run("inspect", str(path)), str(path))
    m = re.match(r"line (\d+), column (\d+): ", what)
    assert m, what
    assert int(m.group(1)) == 3


def test_truncated_trace(tmp_path):
    text = open(TRAIN).read()
    path = tmp_path / "truncated.json"
    path.write_text(text[: len(text) // 2])
    what = assert_one_line_error(run("inspect", str(path)), str(path))
    assert re.match(r"line \d+, column \d+: ", what), what


def test_empty_file(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("")
    what = assert_one_line_error(run("summary", str(path)), str(path))
    assert "empty" in what.lower(), what


def test_not_json_at_all(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not a trace\n")
    what = assert_one_line_error(run("inspect", str(path)), str(path))
    assert re.match(r"line 1, column \d+: ", what), what


def test_binary_garbage(tmp_path):
    path = tmp_path / "garbage.json"
    path.write_bytes(bytes(range(256)) * 4)
    assert_one_line_error(run("inspect", str(path)), str(path))


@pytest.mark.parametrize(
    "document",
    ['[1, 2, 3]', '{"metadata": {}, "layers": 5, "warnings": []}', '"a string"'],
)
def test_wrong_shape(tmp_path, document):
    path = tmp_path / "shape.json"
    path.write_text(document)
    assert_one_line_error(run("inspect", str(path)), str(path))


def test_directory(tmp_path):
    assert_one_line_error(run("inspect", str(tmp_path)), str(tmp_path))


@pytest.fixture
def shared_dir():
    """A directory any user may enter (pytest's tmp_path is private to root under CI)."""
    path = tempfile.mkdtemp(prefix="tterr")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_unreadable_file(shared_dir):
    # As root the binary runs as nobody (run(as_nobody=True)), for whom mode 0 holds.
    readable = os.path.join(shared_dir, "readable.json")
    secret = os.path.join(shared_dir, "secret.json")
    for path in (readable, secret):
        with open(path, "w") as f:
            f.write(open(TRAIN).read())
    os.chmod(readable, 0o644)
    os.chmod(secret, 0)
    # The same user reads a readable copy: what fails below is the permission, nothing else.
    ok = run("summary", readable, as_nobody=True)
    assert ok.returncode == 0, ok.stderr
    what = assert_one_line_error(run("inspect", secret, as_nobody=True), secret)
    assert what == "permission denied"


def test_bad_diff_input_names_the_bad_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{")
    assert_one_line_error(run("diff", TRAIN, str(path)), str(path))


def test_no_subcommand_prints_usage_and_exits_2():
    r = run()
    assert r.returncode == 2
    assert r.stdout == ""
    for command in ["inspect", "summary", "diff", "watch"]:
        assert command in r.stderr


def test_unknown_subcommand_and_flag():
    for args in [("frobnicate",), ("inspect", TRAIN, "--no-such-flag"), ("--color=purple", "inspect", TRAIN)]:
        r = run(*args)
        assert r.returncode == 2, args
        assert r.stdout == ""
        assert r.stderr.startswith("tracetorch: ") and r.stderr.count("\n") == 1, r.stderr


def test_bad_filter_values():
    for args in [("--min-latency", "-3"), ("--min-latency", "nan"), ("--min-latency", "soon")]:
        r = run("inspect", TRAIN, *args)
        assert r.returncode == 2, args
        assert r.stderr.startswith("tracetorch: ") and r.stderr.count("\n") == 1, r.stderr


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0
    assert re.fullmatch(r"tracetorch \d+\.\d+\.\d+\n", r.stdout), r.stdout
    r = run("inspect", "--help")
    assert r.returncode == 0
    for flag in ["--filter", "--type", "--min-latency", "--json", "--recompute"]:
        assert flag in r.stdout
