"""End-to-end: `tracetorch inspect` and `summary` on the upstream fixtures, filters, colour modes."""

import json
import os
import pty
import subprocess

import pytest

from conftest import BIN, clean_env, fixture, load_fixture, parse_plain_tree, run

TRAIN = fixture("train_trace.json")
EXAMPLE = fixture("example_trace.json")


def assert_plain(text):
    assert "\x1b" not in text
    assert all(ord(c) < 128 for c in text), "plain output must be ASCII"


def test_inspect_train_trace_panel():
    r = run("inspect", TRAIN)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    out = r.stdout
    assert "Model Summary" in out
    for key, value in [
        ("Model", "TrainNet"),
        ("PyTorch", "1.13.0a0"),
        ("Layers", "11"),
        ("Forward passes", "20"),
        ("Parameters", "11.2K"),
        ("Execution Time", "81.7ms"),
    ]:
        rows = [l for l in out.splitlines() if l.startswith(f"|  {key} ")]
        assert len(rows) == 1, (key, out)
        assert rows[0].split()[-2] == value, rows[0]


def test_inspect_tree_nests_children_recorded_before_parents():
    r = run("inspect", TRAIN)
    assert r.returncode == 0
    tree = parse_plain_tree(r.stdout)
    recorded = [layer["full_name"] for layer in load_fixture("train_trace.json")["layers"]]
    # Every layer appears exactly once, at the path its full_name gives.
    assert sorted(tree) == sorted(recorded)
    # blocks.0.fc sits under blocks.0 under blocks; top level in execution order.
    assert "blocks.0.fc" in tree and "blocks.0" in tree and "blocks" in tree
    top = [name for name in tree if "." not in name]
    assert top == ["stem", "blocks", "norm", "drop", "head"]
    assert list(tree).index("blocks") < list(tree).index("blocks.0") < list(tree).index("blocks.0.fc")
    assert tree["blocks"].startswith("+-- blocks (Sequential)")
    assert tree["blocks.0"].startswith("|   +-- 0 (Block)")
    assert tree["blocks.0.fc"].startswith("|   |   +-- fc (Linear)")
    assert tree["head"].startswith("\\-- head (Linear)")


def test_inspect_layer_line_fields():
    out = run("inspect", TRAIN).stdout
    tree = parse_plain_tree(out)
    fc = tree["blocks.0.fc"]
    assert fc.endswith(
        "fc (Linear) | Params: 4.2K | Latency: 0.034ms mean (0.029ms-0.048ms x20) | "
        "grad_norm: 0.2969 | Output: [16, 64] | std: 0.32 [ok]"
    ), fc
    assert "Params" not in tree["blocks.0.act"]  # GELU has no parameters.
    assert tree["norm"].endswith("[warning]")
    assert tree["head"].endswith("Output: [16, 10] | std: 0.44 [ok]")


def test_inspect_anomalies_table():
    out = run("inspect", TRAIN).stdout
    assert "Warnings & Anomalies" in out
    header = [l for l in out.splitlines() if l.startswith("| Severity")]
    assert len(header) == 1
    assert [c.strip() for c in header[0].strip("|").split("|")] == ["Severity", "Layer", "Message"]
    rows = [l for l in out.splitlines() if l.startswith("| warning")]
    assert len(rows) == 1
    assert [c.strip() for c in rows[0].strip("|").split("|")] == [
        "warning",
        "norm",
        "Variance spike: std increased from 0.07 to 0.99 (x14.7)",
    ]
    # Table lines are all the same width.
    lines = out.splitlines()
    table = lines[lines.index("Warnings & Anomalies") + 1 :]
    assert len(table) == 5
    assert len({len(l) for l in table}) == 1


def test_inspect_example_trace_single_forward():
    r = run("inspect", EXAMPLE)
    assert r.returncode == 0
    tree = parse_plain_tree(r.stdout)
    assert list(tree) == ["embedding", "attention", "linear"]
    assert "Params: 768.0K | Latency: 10.5ms | Output: [8, 512, 768] | std: 1.00" in tree["embedding"]
    assert "Params: 1.8M | Latency: 10545ms" in tree["attention"]
    assert r.stdout.rstrip().endswith("No anomalies detected")
    assert "Parameters        2.5M" in r.stdout


def test_summary_prints_panel_and_counts_only():
    r = run("summary", TRAIN)
    assert r.returncode == 0
    assert "Model Summary" in r.stdout
    assert "Layers" in r.stdout and "11" in r.stdout
    assert "+-- " not in r.stdout  # No tree.
    assert r.stdout.endswith("Anomalies: 0 critical, 1 warning, 0 info\n")
    assert_plain(r.stdout)


def test_json_with_type_and_glob_filters():
    r = run("inspect", TRAIN, "--json", "--type", "Linear", "--filter", "blocks.*")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [l["full_name"] for l in doc["layers"]] == ["blocks.0.fc", "blocks.1.fc"]
    # Only the anomalies of the selected layers (the norm warning is not one of them).
    assert doc["warnings"] == []
    assert doc["metadata"]["model_name"] == "TrainNet"
    original = {l["full_name"]: l for l in load_fixture("train_trace.json")["layers"]}
    for layer in doc["layers"]:
        assert layer["params"] == original[layer["full_name"]]["params"]
        assert layer["latency_ms_mean"] == pytest.approx(
            original[layer["full_name"]]["latency_ms_mean"], rel=1e-9
        )


def test_json_filter_keeps_anomalies_of_selected_layers():
    doc = json.loads(run("inspect", TRAIN, "--json", "--filter", "norm").stdout)
    assert [l["full_name"] for l in doc["layers"]] == ["norm"]
    assert [(w["layer"], w["type"], w["severity"]) for w in doc["warnings"]] == [
        ("norm", "exploding_variance", "warning")
    ]


def test_json_without_filters_is_the_whole_record():
    doc = json.loads(run("inspect", TRAIN, "--json").stdout)
    original = load_fixture("train_trace.json")
    assert [l["full_name"] for l in doc["layers"]] == [l["full_name"] for l in original["layers"]]
    assert doc["warnings"] == original["warnings"]


def test_min_latency_filter():
    r = run("inspect", TRAIN, "--min-latency", "0.5")
    assert r.returncode == 0
    tree = parse_plain_tree(r.stdout)
    assert list(tree) == ["blocks", "blocks.0", "blocks.1"]
    assert "11 (3 shown)" in r.stdout
    # norm is filtered out, so is its anomaly.
    assert "LayerNorm" not in r.stdout and "Variance spike" not in r.stdout
    assert "No anomalies detected" in r.stdout


def test_filtered_out_ancestors_still_give_structure():
    r = run("inspect", TRAIN, "--filter", "blocks.*.fc")
    tree = parse_plain_tree(r.stdout)
    assert list(tree) == ["blocks", "blocks.0", "blocks.0.fc", "blocks.1", "blocks.1.fc"]
    assert tree["blocks"] == "\\-- blocks"  # Structural: name only.
    assert tree["blocks.0"] == "    +-- 0"
    assert "fc (Linear) | Params: 4.2K" in tree["blocks.0.fc"]


def test_filter_matching_nothing():
    r = run("inspect", TRAIN, "--type", "Conv2d")
    assert r.returncode == 0
    assert "No layers matched the filter." in r.stdout
    assert "11 (0 shown)" in r.stdout


def test_recompute_reruns_detection():
    r = run("inspect", TRAIN, "--recompute", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(w["layer"], w["type"]) for w in doc["warnings"]] == [("norm", "exploding_variance")]
    perturbed = run("summary", fixture("train_trace_perturbed.json"), "--recompute")
    assert perturbed.returncode == 0
    assert "Anomalies: 0 critical, 1 warning, 1 info" in perturbed.stdout


@pytest.mark.parametrize("command", ["inspect", "summary"])
def test_piped_and_no_color_output_is_plain(command):
    assert_plain(run(command, TRAIN).stdout)
    assert_plain(run(command, TRAIN, env=clean_env(NO_COLOR="1")).stdout)
    assert_plain(run(command, TRAIN, "--color=never").stdout)


def test_color_always_forces_rich_output():
    out = run("inspect", TRAIN, "--color=always").stdout
    assert "\x1b[" in out
    assert "├── " in out and "└── " in out and "│" in out
    assert "╭" in out and "✓" in out and "⚠" in out
    # --color may also come before the subcommand.
    assert run("--color", "always", "inspect", TRAIN).stdout == out


def run_on_pty(*args, env):
    """Runs tracetorch with stdout on a pseudo-terminal; returns (exit code, output)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([BIN, *args], stdout=slave, stderr=subprocess.PIPE, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal.
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=30)
        return proc.returncode, b"".join(chunks).decode()
    finally:
        os.close(master)


def test_terminal_gets_colour_unless_no_color():
    code, out = run_on_pty("inspect", TRAIN, env=clean_env())
    assert code == 0
    assert "\x1b[" in out and "├── " in out
    code, out = run_on_pty("inspect", TRAIN, env=clean_env(NO_COLOR="1"))
    assert code == 0
    assert "\x1b" not in out and "+-- blocks" in out
