"""End-to-end: `tracetorch diff` on the upstream fixtures: text, --json, thresholds, exit codes."""

import json
from collections import Counter

import pytest

from conftest import fixture, load_fixture, run

BASE = fixture("train_trace.json")
PERTURBED = fixture("train_trace_perturbed.json")


def table_rows(out, first_cell):
    return [
        [c.strip() for c in l.strip("|").split("|")]
        for l in out.splitlines()
        if l.startswith(f"| {first_cell}")
    ]


def test_identical_traces_exit_0():
    r = run("diff", BASE, BASE)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Trace Diff" in out
    assert "|  Critical    0" in out and "|  Warnings    0" in out
    assert "No changes detected between traces." in out
    assert out.rstrip().endswith("OK: no regressions detected.")
    assert "\x1b" not in out


def test_perturbed_trace_exits_1_with_26_warnings():
    r = run("diff", BASE, PERTURBED)
    assert r.returncode == 1, r.stderr
    out = r.stdout
    assert "|  Baseline    TrainNet" in out
    assert "|  Critical    0 " in out
    assert "|  Warnings    26 " in out
    assert "Diff entries" in out
    header = table_rows(out, "Severity")
    assert header == [["Severity", "Kind", "Layer", "Message"]]
    warnings = table_rows(out, "warning")
    infos = table_rows(out, "info")
    assert len(warnings) == 26
    assert ["warning", "latency_regression", "stem",
            "Latency regression: 0.035ms -> 0.046ms (+34.4%)"] in warnings
    assert ["warning", "grad_norm_change", "norm",
            "Gradient norm changed: 0.1321 -> 9.2146 (+6877.3%)"] in warnings
    assert ["info", "resolved_anomaly", "norm",
            "Resolved anomaly: Variance spike: std increased from 0.07 to 0.99 (x14.7)"] in infos
    assert out.rstrip().endswith("FAIL: 0 critical, 26 warning(s) - regressions detected.")
    lines = out.splitlines()
    start = lines.index("Diff entries") + 1
    table = lines[start : lines.index("", start)]
    assert len(table) == 26 + len(infos) + 4  # Rules above, below the header and at the end.
    assert len({len(l) for l in table}) == 1


def test_diff_is_deterministic():
    assert run("diff", BASE, PERTURBED).stdout == run("diff", BASE, PERTURBED).stdout


def test_json_parses_and_matches_upstream():
    r = run("diff", BASE, PERTURBED, "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    upstream = load_fixture("diff_train_vs_perturbed.json")
    for key in ["baseline_model", "current_model", "has_regressions", "critical_count",
                "warning_count"]:
        assert doc[key] == upstream[key], key
    assert doc["warning_count"] == 26 and doc["critical_count"] == 0

    def key(e):
        return (e["severity"], e["kind"], e["layer"], e["message"])

    # Upstream's entry order changes from run to run: compare as multisets.
    assert Counter(map(key, doc["entries"])) == Counter(map(key, upstream["entries"]))
    ours = {key(e): e["details"] for e in doc["entries"]}
    for entry in upstream["entries"]:
        for name, value in entry["details"].items():
            got = ours[key(entry)][name]
            if isinstance(value, float):
                assert got == pytest.approx(value, rel=1e-5), (key(entry), name)
            else:
                assert got == value, (key(entry), name)


def test_json_identical_has_no_entries():
    r = run("diff", BASE, BASE, "--json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert doc["entries"] == [] and doc["has_regressions"] is False


def test_thresholds_change_what_is_reported():
    r = run("diff", BASE, PERTURBED, "--json", "--latency-threshold", "100",
            "--grad-norm-threshold", "1000", "--std-threshold", "1000")
    doc = json.loads(r.stdout)
    kinds = Counter(e["kind"] for e in doc["entries"])
    assert "latency_regression" not in kinds and "grad_norm_change" not in kinds
    assert "activation_std_change" not in kinds
    # The anomaly changes remain and still fail the run.
    assert kinds["new_anomaly"] == 2 and kinds["resolved_anomaly"] == 1
    assert r.returncode == 1


@pytest.mark.parametrize(
    "flag,value",
    [("--latency-threshold", "-0.1"), ("--grad-norm-threshold", "nan"), ("--std-threshold", "inf")],
)
def test_invalid_thresholds_exit_2(flag, value):
    r = run("diff", BASE, PERTURBED, flag, value)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.startswith("tracetorch: invalid diff thresholds: ")
    assert r.stderr.count("\n") == 1


def test_threshold_that_is_not_a_number_exits_2():
    r = run("diff", BASE, PERTURBED, "--latency-threshold", "fast")
    assert r.returncode == 2
    assert r.stderr.startswith("tracetorch: ")
    assert r.stderr.count("\n") == 1


@pytest.mark.parametrize("order", ["baseline", "current"])
def test_missing_input_exits_2_naming_it(order, tmp_path):
    missing = str(tmp_path / "nope.json")
    args = (missing, BASE) if order == "baseline" else (BASE, missing)
    r = run("diff", *args)
    assert r.returncode == 2
    assert r.stderr == f"tracetorch: {missing}: file not found\n"
    assert r.stdout == ""


def test_missing_arguments_is_a_usage_error():
    r = run("diff", BASE)
    assert r.returncode == 2
    assert r.stderr.startswith("tracetorch: ")
    assert r.stderr.count("\n") == 1
