#!/usr/bin/python3
"""The overhead table of issue 29, each figure by two clocks: wall (CPU time) and instructions.

    tools/build                                           # the benches are part of the default build
    /usr/bin/python3 bench/overhead_table.py              # everything: ~1 hour on 2 cores
    /usr/bin/python3 bench/overhead_table.py --rows diff,daemon --runs 5 --json out.json
    /usr/bin/python3 bench/overhead_table.py --no-count   # wall figures only (minutes)
    # Wall figures on a quiet machine, then the counts while something else runs (callgrind's
    # counts do not move with the load); the table printed combines both:
    /usr/bin/python3 bench/overhead_table.py --no-count --json wall.json
    /usr/bin/python3 bench/overhead_table.py --wall-from wall.json

Rows (README, "Benchmarks"):
  python     Python agent, statistics on, steady state: forward of the MLP / CNN / resnet18 in an
             open TraceSession over the plain forward (bench/counted.py fwd-*); counted, also the
             floor: the same forward with a no-op Python pre-hook and hook on every module
             (counted.py's third variant, hooks), what any per-module hook costs before it does
             anything
  first      the CNN's forward as the first forward of a fresh TraceSession, i.e. what a one-shot
             `with TraceSession(m): m(x)` costs (counted.py first-cnn)
  libtorch   the libtorch door, statistics on, C++ / TorchScript forward+backward
             (tracetorch_bench_libtorch)
  ops        op-level capture of resnet18, every activation kept (counted.py ops-resnet18)
  on_nan     a training step of the 4-conv CNN in TraceSession(model, ops="on_nan") (counted.py
             on_nan-cnn)
  diff       `tracetorch diff` of two 10,000-layer traces as a whole process: wall, peak RSS against
             the input, and tracetorch-ml's `tracetorch diff` on the same files (--ml-python: an
             interpreter with torch and rich, e.g. a venv made by tools/torch_venv 2.11; the wheel of
             tracetorch-ml 0.2.0 comes from pip's cache, --ml-wheel)
  daemon     tracetorchd's CPU per layer event with 8 client-library agents
             (tracetorchd_ingest_bench)

Wall: every figure is the median of --runs separate runs (processes) with the range over them; each
run is itself the median over interleaved rounds (traced/plain of the same round), timed by the
process's CPU time. Instructions (valgrind --tool=callgrind; the machine's load does not move them):
  ratios      traced/plain instructions per step, the same workloads and steps as the wall figure,
              regions marked in the process (bench/callgrind_region.cc, --instr-atstart=no)
  diff        instructions of the whole `tracetorch diff` process, and per byte of JSON read
  daemon      the daemon's instructions per accepted event: two 5-second runs of
              tracetorchd_count_bench at 10 and 50 steps/s per agent, (I2 - I1) / (N2 - N1), so
              start-up, shutdown and the daemon's per-second work cancel
A counted figure is deterministic up to Python's own variation (a second run agrees to well under
1%), so one run is taken.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = "/usr/bin/python3"
ROWS = ["python", "first", "libtorch", "ops", "on_nan", "diff", "daemon"]
TARGETS = {"fwd-mlp": 1.10, "fwd-cnn": 1.03, "fwd-resnet18": 1.03, "first-cnn": 1.05,
           "libtorch": 1.03, "ops-resnet18": 1.20, "on_nan-cnn": 1.05}
DIFF_TARGET_S, DAEMON_TARGET_NS = 0.08, 100.0
# Steps per callgrind region (each region runs under valgrind, ~50x slower than native).
COUNT_STEPS = {"fwd-mlp": 20, "fwd-cnn": 3, "fwd-resnet18": 1, "first-cnn": 3, "ops-resnet18": 1,
               "on_nan-cnn": 1}
# Iterations per callgrind region of the libtorch cases (a C++ step's count does not vary).
LIBTORCH_COUNT_ITERS = 1


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def fmt(s: dict, digits: int = 2) -> str:
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


# ---- callgrind ---------------------------------------------------------------------------------


def callgrind_dumps(out_dir: str) -> dict[str, int]:
    """{region name: instructions} from the dumps of a --instr-atstart=no run.

    A dump's "totals:" line is the sum of the costs it lists, i.e. what ran since the last
    CALLGRIND_ZERO_STATS; its "summary:" line can include what ran before the zeroing.
    """
    regions = {}
    for path in glob.glob(os.path.join(out_dir, "cg.out.*")):
        text = Path(path).read_text(errors="replace")
        name = re.search(r"^desc: Trigger: Client Request: (.+)$", text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M)
        if name and total:
            regions[name.group(1).strip()] = int(total.group(1))
    return regions


def callgrind_total(path: str) -> int:
    text = Path(path).read_text(errors="replace")
    m = re.search(r"^totals: (\d+)", text, re.M)
    if not m:
        raise RuntimeError(f"no totals in {path}")
    return int(m.group(1))


def run(cmd: list[str], env: dict | None = None, timeout: float = 3600) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return r.stdout


def count_regions(cmd: list[str], env: dict | None = None) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as d:
        run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={d}/cg.out", *cmd], env=env)
        regions = callgrind_dumps(d)
    if not regions:
        raise RuntimeError(f"no callgrind regions from {' '.join(cmd)}")
    return regions


# ---- rows --------------------------------------------------------------------------------------


class Table:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.build = Path(args.build).resolve()
        self.env = dict(os.environ, PYTHONPATH=str(self.build / "python"))
        self.results: dict[str, dict] = {}
        # Wall figures of an earlier run (--wall-from): taken over instead of measured again.
        # (Several files, a later one's figure winning: each row group's wall figures may come
        # from a run of its own.)
        self.prior: dict = {}
        self.prior_loads: list[str] = []  # "FILE (load average S at its start, E at its end)"
        for path in args.wall_from or []:
            earlier = json.loads(Path(path).read_text())
            load = earlier.pop("load", None)
            self.prior.update(earlier)
            self.prior_loads.append(path + (f" (load average {load['start']:.1f} at its start, "
                                            f"{load['end']:.1f} at its end)" if load else ""))
        # Counted figures of earlier runs (--counts-from; a later file's figure wins): the heavy
        # ones take an hour each, so they are taken in separate runs, side by side.
        self.prior_counts: dict = {}
        for path in args.counts_from or []:
            for key, value in json.loads(Path(path).read_text()).items():
                if isinstance(value, dict):
                    self.prior_counts.setdefault(key, {}).update(value)

    def prior_wall(self, key: str, fields: tuple[str, ...]) -> dict | None:
        """The earlier run's `fields` of `key`, when --wall-from has them all; else None."""
        r = self.prior.get(key)
        if not r or any(f not in r for f in fields):
            return None
        log(f"  {key}: wall figures from --wall-from")
        return {f: r[f] for f in fields}

    def prior_count(self, *path: str) -> dict | None:
        """The earlier run's counted figures at `path` (e.g. "fwd-mlp"; "libtorch", "cpp"), when
        --counts-from has them; else None."""
        r = self.prior_counts
        for key in path:
            r = r.get(key, {}) if isinstance(r, dict) else {}
        if "instructions" not in r:
            return None
        log(f"  {'/'.join(path)}: counts from --counts-from")
        return {k: r[k] for k in ("instructions", "hooks_floor") if k in r}

    def counts(self, workload: str) -> bool:
        """Whether `workload` is counted in this run (--no-count, --skip-count)."""
        return self.args.count and workload not in self.args.skip_count.split(",")

    def count_workload(self, workload: str) -> dict:
        """Instructions per step of `workload`'s traced variant against its plain one
        (counted.py --count); for fwd-*, "hooks_floor" the same for the no-op hooks variant."""
        lib = self.build / "bench/libtracetorch_callgrind_region.so"
        n = COUNT_STEPS[workload]
        regions = count_regions([PY, str(ROOT / "bench/counted.py"), workload, "--count",
                                 str(n), "--region-lib", str(lib)], env=self.env)
        plain = regions[f"{workload}/plain"] / n
        out: dict = {}
        for variant in ("traced", "hooks"):
            if f"{workload}/{variant}" not in regions:
                continue
            v = regions[f"{workload}/{variant}"] / n
            out[variant] = {"plain": plain, variant: v, "ratio": v / plain,
                            "extra_per_step": v - plain}
            log(f"  {workload} instructions/step: plain {plain / 1e6:.1f} M, {variant} "
                f"{v / 1e6:.1f} M: {v / plain:.3f}")
        return out

    def python_workload(self, workload: str) -> dict:
        out: dict = self.prior_wall(workload, ("wall", "plain_ms", "traced_ms")) or {}
        if out and "hooks_wall" in self.prior.get(workload, {}):
            out["hooks_wall"] = self.prior[workload]["hooks_wall"]
        runs = []
        for i in range(0 if out else self.args.runs):
            r = json.loads(run([PY, str(ROOT / "bench/counted.py"), workload, "--wall",
                                "--rounds", str(self.args.rounds)], env=self.env))
            log(f"  {workload} wall run {i + 1}: {r['ratio']:.3f} "
                f"({r['ratio_min']:.3f}–{r['ratio_max']:.3f}), plain {r['plain_ms']:.2f} ms")
            runs.append(r)
        if runs:
            out["wall"] = spread([r["ratio"] for r in runs])
            if all("hooks_ratio" in r for r in runs):
                out["hooks_wall"] = spread([r["hooks_ratio"] for r in runs])
            out["plain_ms"] = statistics.median(r["plain_ms"] for r in runs)
            out["traced_ms"] = statistics.median(r["traced_ms"] for r in runs)
        if self.counts(workload) and (prior := self.prior_count(workload)):
            out.update(prior)
        elif self.counts(workload):
            counted = self.count_workload(workload)
            out["instructions"] = counted["traced"]
            if "hooks" in counted:
                # What a no-op Python hook on every module costs the same forward: the floor.
                out["hooks_floor"] = counted["hooks"]
        return out

    def row_python(self) -> None:
        for w in ("fwd-mlp", "fwd-cnn", "fwd-resnet18"):
            self.results[w] = self.python_workload(w)

    def row_first(self) -> None:
        self.results["first-cnn"] = self.python_workload("first-cnn")

    def row_ops(self) -> None:
        self.results["ops-resnet18"] = self.python_workload("ops-resnet18")

    def row_on_nan(self) -> None:
        self.results["on_nan-cnn"] = self.python_workload("on_nan-cnn")

    def row_libtorch(self) -> None:
        binary = str(self.build / "agent/libtorch/tracetorch_bench_libtorch")
        cases = {"cpp": "cpp forward+backward", "script": "torchscript forward+backward"}
        per_case: dict[str, list[float]] = {k: [] for k in cases}
        prior = self.prior_wall("libtorch", tuple(cases))
        for i in range(0 if prior else self.args.runs):
            text = run([binary, "--rounds", str(self.args.rounds)])
            for key, name in cases.items():
                m = re.search(rf"^{re.escape(name)}\s+on\s+\S+\s+\S+\s+(\S+)$", text, re.M)
                if not m:
                    raise RuntimeError(f"no '{name}' line in:\n{text}")
                per_case[key].append(float(m.group(1)))
            log(f"  libtorch wall run {i + 1}: cpp {per_case['cpp'][-1]:.3f}, "
                f"script {per_case['script'][-1]:.3f}")
        out = ({k: {"wall": prior[k]["wall"]} for k in cases} if prior
               else {k: {"wall": spread(v)} for k, v in per_case.items()})
        priors = {k: self.prior_count("libtorch", k) for k in cases}
        if self.counts("libtorch") and all(priors.values()):
            for key in cases:
                out[key].update(priors[key])
        elif self.counts("libtorch"):
            # One process per model, side by side: each takes the better part of an hour.
            models = {"cpp": "cpp", "script": "torchscript"}
            with concurrent.futures.ThreadPoolExecutor(len(models)) as pool:
                parts = pool.map(lambda m: count_regions(
                    [binary, "--count", str(LIBTORCH_COUNT_ITERS), "--case", m]), models.values())
                regions = {k: v for part in parts for k, v in part.items()}
            for key, name in cases.items():
                plain = regions[f"{name}/plain"] / LIBTORCH_COUNT_ITERS
                traced = regions[f"{name}/traced"] / LIBTORCH_COUNT_ITERS
                out[key]["instructions"] = {"plain": plain, "traced": traced,
                                            "ratio": traced / plain,
                                            "extra_per_step": traced - plain}
                log(f"  libtorch {key} instructions/iteration: plain {plain / 1e6:.1f} M, "
                    f"traced {traced / 1e6:.1f} M: {traced / plain:.3f}")
        self.results["libtorch"] = out

    def row_diff(self) -> None:
        cli = str(self.build / "cli/tracetorch")
        with tempfile.TemporaryDirectory() as d:
            run([str(self.build / "bench/load_diff_bench"), "--write", d, "10000"])
            a, b = f"{d}/a.json", f"{d}/b.json"
            input_bytes = os.path.getsize(a) + os.path.getsize(b)
            walls, peaks, faults = [], [], []
            prior = self.prior_wall("diff", ("wall_s", "peak_bytes", "input_bytes"))
            for _ in range(0 if prior else max(self.args.runs, 5)):
                t0 = time.perf_counter()
                p = subprocess.Popen([cli, "diff", a, b], stdout=subprocess.DEVNULL)
                _, status, usage = os.wait4(p.pid, 0)
                walls.append(time.perf_counter() - t0)
                peaks.append(usage.ru_maxrss * 1024)
                faults.append(usage.ru_minflt)
                if os.waitstatus_to_exitcode(status) not in (0, 1):
                    raise RuntimeError(f"tracetorch diff exited {status}")
            if prior:
                out = dict(prior)
                for key in ("ml_wall_s", "page_faults"):
                    if key in self.prior["diff"]:
                        out[key] = self.prior["diff"][key]
            else:
                # Page faults: the process's first touch of its memory, half of a diff's time
                # before its buffers were shared and given huge pages; nearly as steady as a count.
                out = {"wall_s": spread(walls), "peak_bytes": spread(peaks),
                       "page_faults": spread(faults), "input_bytes": input_bytes}
                log(f"  diff: {fmt(out['wall_s'], 3)} s, peak "
                    f"{statistics.median(peaks) / 2**20:.0f} MiB for {input_bytes / 2**20:.1f} MiB "
                    "of input")
            if self.args.ml_python and not prior:
                ml = []
                env = dict(os.environ, PYTHONPATH=self.args.ml_wheel)
                for _ in range(self.args.runs):
                    t0 = time.perf_counter()
                    r = subprocess.run([self.args.ml_python, "-m", "tracetorch.cli", "diff", a, b],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       env=env, text=True)
                    ml.append(time.perf_counter() - t0)
                    if r.returncode not in (0, 1):
                        raise RuntimeError(f"tracetorch-ml diff failed: {r.stderr[-2000:]}")
                out["ml_wall_s"] = spread(ml)
                log(f"  tracetorch-ml diff: {fmt(out['ml_wall_s'], 2)} s")
            if self.args.count and (prior_count := self.prior_count("diff")):
                out.update(prior_count)
            elif self.args.count:
                with tempfile.TemporaryDirectory() as cg:
                    subprocess.run(["valgrind", "--tool=callgrind",
                                    f"--callgrind-out-file={cg}/cg.out", cli, "diff", a, b],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    total = callgrind_total(f"{cg}/cg.out")
                out["instructions"] = {"total": total, "per_input_byte": total / input_bytes}
                log(f"  diff instructions: {total / 1e6:.0f} M, {total / input_bytes:.1f} per "
                    f"input byte")
        self.results["diff"] = out

    def row_daemon(self) -> None:
        binary = str(self.build / "bench/tracetorchd_ingest_bench")
        ns = []
        prior = self.prior_wall("daemon", ("ns_per_event",))
        for i in range(0 if prior else self.args.runs):
            text = run([binary, "3", "50"])
            m = re.search(r"^client library\s+agents=8 .*daemon CPU=\s*\S+ cores \(\s*(\d+) ns/event",
                          text, re.M)
            if not m:
                raise RuntimeError(f"no 8-agent client library line in:\n{text}")
            ns.append(float(m.group(1)))
            log(f"  daemon wall run {i + 1}: {ns[-1]:.0f} ns/event")
        out = dict(prior) if prior else {"ns_per_event": spread(ns)}
        if self.args.count and (prior_count := self.prior_count("daemon")):
            out.update(prior_count)
        elif self.args.count:
            count_bin = str(self.build / "bench/tracetorchd_count_bench")
            points = []
            for rate in (10, 50):
                with tempfile.TemporaryDirectory() as cg:
                    text = run([count_bin, "5", str(rate), "valgrind", "--tool=callgrind",
                                f"--callgrind-out-file={cg}/cg.out"])
                    events = int(re.search(r"events_total (\d+)", text).group(1))
                    points.append((events, callgrind_total(f"{cg}/cg.out")))
            (e1, i1), (e2, i2) = points
            if e2 <= e1:
                raise RuntimeError(f"the faster daemon run accepted no more events: {points}")
            per_event = (i2 - i1) / (e2 - e1)
            out["instructions"] = {"per_event": per_event, "points": points}
            log(f"  daemon instructions per event: {per_event:.0f} ({points})")
        self.results["daemon"] = out

    # ---- the table in the README's form -------------------------------------------------------

    def cell(self, key: str) -> str:
        r = self.results[key]
        text = fmt(r["wall"])
        if "instructions" in r:
            text += f" [{r['instructions']['ratio']:.3f}]"
        if "hooks_wall" in r or "hooks_floor" in r:
            # The floor: a no-op Python hook on every module, by both clocks.
            text += "; no-op hooks"
            if "hooks_wall" in r:
                text += f" {fmt(r['hooks_wall'])}"
            if "hooks_floor" in r:
                text += f" [{r['hooks_floor']['ratio']:.3f}]"
        return text

    def verdict(self, keys: list[str], target_of) -> str:
        missed = [k for k in keys if self.results[k]["wall"]["median"] > target_of(k)]
        return "met" if not missed else "not met: " + ", ".join(missed)

    def markdown(self) -> str:
        rows = ["| measure | wall (CPU time): median (range) of runs [instructions] | target |",
                "|---|---|---|"]
        r = self.results
        if "fwd-mlp" in r:
            keys = ["fwd-mlp", "fwd-cnn", "fwd-resnet18"]
            rows.append("| Python agent, stats on, steady state: MLP / CNN / resnet18 forward | "
                        + " / ".join(self.cell(k) for k in keys)
                        + " | ≤ 1.10 / 1.03 / 1.03: "
                        + self.verdict(keys, TARGETS.get) + " |")
        if "first-cnn" in r:
            rows.append("| the CNN's forward as the first forward of a fresh `TraceSession` | "
                        f"{self.cell('first-cnn')} | ≤ 1.05: "
                        f"{self.verdict(['first-cnn'], TARGETS.get)} |")
        if "libtorch" in r:
            lt = r["libtorch"]
            cells = []
            for k in ("cpp", "script"):
                c = fmt(lt[k]["wall"])
                if "instructions" in lt[k]:
                    c += f" [{lt[k]['instructions']['ratio']:.3f}]"
                cells.append(c)
            met = all(lt[k]["wall"]["median"] <= TARGETS["libtorch"] for k in ("cpp", "script"))
            rows.append("| libtorch door, stats on, C++ / TorchScript forward+backward | "
                        + " / ".join(cells) + f" | ≤ 1.03: {'met' if met else 'not met'} |")
        if "ops-resnet18" in r:
            rows.append(f"| op-level full capture, resnet18 | {self.cell('ops-resnet18')} | "
                        f"≤ 1.20: {self.verdict(['ops-resnet18'], TARGETS.get)} |")
        if "on_nan-cnn" in r:
            rows.append(f"| `ops=\"on_nan\"` training step, 4-conv CNN | {self.cell('on_nan-cnn')}"
                        f" | ≤ 1.05: {self.verdict(['on_nan-cnn'], TARGETS.get)} |")
        if "diff" in r:
            d = r["diff"]
            peak = d["peak_bytes"]
            text = (f"{fmt(d['wall_s'], 3)} s, peak {peak['median'] / 2**20:.1f} MiB "
                    f"({peak['min'] / 2**20:.1f}–{peak['max'] / 2**20:.1f}) "
                    f"= {peak['median'] / d['input_bytes']:.2f}× the input "
                    f"({d['input_bytes'] / 2**20:.1f} MiB)")
            if "page_faults" in d:
                text += f", {d['page_faults']['median'] / 1e3:.1f} k page faults"
            if "ml_wall_s" in d:
                text += (f"; tracetorch-ml {fmt(d['ml_wall_s'], 2)} s "
                         f"({d['ml_wall_s']['median'] / d['wall_s']['median']:.0f}×)")
            if "instructions" in d:
                text += (f" [{d['instructions']['total'] / 1e6:.0f} M instructions, "
                         f"{d['instructions']['per_input_byte']:.1f} per byte]")
            met = (d["wall_s"]["median"] <= DIFF_TARGET_S
                   and d["peak_bytes"]["median"] <= 2 * d["input_bytes"])
            rows.append("| `tracetorch diff` of two 10,000-layer traces, whole process | "
                        f"{text} | ≤ 0.08 s, peak ≤ 2× the input: "
                        f"{'met' if met else 'not met'} |")
        if "daemon" in r:
            d = r["daemon"]
            text = f"{fmt(d['ns_per_event'], 0)} ns"
            if "instructions" in d:
                text += f" [{d['instructions']['per_event']:.0f} instructions]"
            met = d["ns_per_event"]["median"] <= DAEMON_TARGET_NS
            rows.append(f"| tracetorchd CPU per layer event, 8 agents | {text} | ≤ 100 ns: "
                        f"{'met' if met else 'not met'} |")
        return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--rows", default=",".join(ROWS), help=f"any of {','.join(ROWS)}")
    ap.add_argument("--runs", type=int, default=3, help="wall runs per figure (at least 3)")
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds within a run")
    ap.add_argument("--no-count", dest="count", action="store_false",
                    help="skip the callgrind twins")
    ap.add_argument("--ml-python", help="an interpreter with torch and rich for tracetorch-ml")
    ap.add_argument("--ml-wheel", default=os.path.expanduser(
        "~/.cache/pip/tracetorch-wheelhouse/tracetorch_ml-0.2.0-py3-none-any.whl"))
    ap.add_argument("--json", help="also write every figure here")
    ap.add_argument("--skip-count", default="", metavar="WORKLOADS",
                    help="workloads not to count: counted.py's (e.g. fwd-resnet18,"
                    "ops-resnet18: resnet18 under callgrind takes over 20 CPU-minutes a variant "
                    "on 2 cores) or libtorch (its C++ and TorchScript ResNets, as long)")
    ap.add_argument("--wall-from", action="append", metavar="JSON",
                    help="take the wall figures from an earlier --json (e.g. one taken with "
                    "--no-count on a quiet machine) and only count; repeatable")
    ap.add_argument("--counts-from", action="append", metavar="JSON",
                    help="take the counted figures an earlier --json has (e.g. the resnet18 and "
                    "libtorch counts, an hour's work each) and count the rest; repeatable")
    args = ap.parse_args()
    rows = args.rows.split(",")
    for row in rows:
        if row not in ROWS:
            ap.error(f"unknown row {row!r}; rows are {', '.join(ROWS)}")
    if args.runs < 3:
        log("note: fewer than 3 runs; the README quotes medians of at least 3")
    table = Table(args)
    load = os.getloadavg()[0]
    for row in rows:
        log(f"{row}:")
        getattr(table, f"row_{row}")()
        if args.json:  # After each row: a late row's failure does not lose an hour of counts.
            Path(args.json).write_text(json.dumps(table.results, indent=2))
    end_load = os.getloadavg()[0]
    if args.wall_from:
        loads = "wall figures from " + ", ".join(table.prior_loads)
    else:
        loads = f"load average {load:.1f} at the start, {end_load:.1f} at the end"
        table.results["load"] = {"start": load, "end": end_load}
    skipped = f"; not counted: {args.skip_count}" if args.skip_count and args.count else ""
    runs = "each wall figure the median of its runs" if args.wall_from else (
        f"{args.runs} runs per wall figure")
    print(f"({loads}; {runs}; [instructions] traced/plain under callgrind{skipped})")
    print(table.markdown())
    if args.json:
        Path(args.json).write_text(json.dumps(table.results, indent=2))


if __name__ == "__main__":
    main()
