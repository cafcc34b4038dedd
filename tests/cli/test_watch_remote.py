"""End-to-end: `tracetorch watch --remote` against a real tracetorchd while a traced training run (the
Python agent) streams to it. JSON for scripts over a pipe; exit codes at session end, on SIGINT,
for an unknown session and for an unreachable daemon."""

import json
import signal

import pytest

from conftest import BIN, Spawned, run
from live_daemon import DEADLINE_S, live, wait_until  # noqa: F401 (live is a fixture)


class Viewer(Spawned):
    """A running `tracetorch watch --remote ...`."""

    def __init__(self, args, env):
        super().__init__([BIN, "watch", *args], env=env)

    def docs(self):
        # Only whole lines: the last one may still be arriving.
        text = self.output
        return [json.loads(l) for l in text[: text.rfind("\n") + 1].splitlines() if l]

    def wait(self):
        return super().wait(timeout=DEADLINE_S)


@pytest.fixture
def viewers(background):
    return lambda *a, **kw: background(Viewer, *a, **kw)


def session_updates(docs):
    return [d for d in docs if d["type"] == "update"]


def test_json_updates_arrive_live_and_the_watch_ends_with_the_session(live, viewers):
    d = live.daemon
    # Started before the run: "latest" is retried until the session exists (--connect-timeout).
    v = viewers(["--remote", d.rpc, "latest", "--json", "--interval", "0.1",
                 "--connect-timeout", "60"], env=d.env())
    t = live.train("--step-delay", "0.05")
    t.wait_steps(5)
    # Several updates while the run is live, with growing event counts.
    wait_until(lambda: len([u for u in session_updates(v.docs()) if u["session"]["events"] > 0]) >= 3,
               "3 live updates", on_timeout=lambda: v.output + d.log_text())
    t.wait_steps(15)
    t.finish()
    steps = t.steps()
    code, out, err = v.wait()
    assert code == 0, err
    assert err == ""

    docs = [json.loads(l) for l in out.splitlines()]
    updates = session_updates(docs)
    assert updates[0]["kind"] == "full"
    live_updates = [u for u in updates if not u["ended"]]
    assert len(live_updates) >= 3
    sequences = [u["sequence"] for u in updates]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    events = [u["session"]["events"] for u in live_updates]
    assert events == sorted(events) and events[-1] > events[0]
    ids = {u["session"]["session_id"] for u in updates}
    assert len(ids) == 1  # "latest" resolved once.
    # The hub sends the final full state (already "finished") just before session_ended.
    assert all(u["session"]["state"] == "live" for u in live_updates[:-1])
    assert live_updates[-1]["session"]["state"] in ("live", "finished")

    # The last document is the end, with the final state.
    final = docs[-1]
    assert final["type"] == "update" and final["kind"] == "session_ended" and final["ended"] is True
    assert final["session"]["state"] == "finished"
    assert final["record"]["metadata"]["model_name"] == "TrainNet"
    layers = {l["full_name"]: l for l in final["record"]["layers"]}
    assert {"stem", "blocks.0.fc", "blocks.1.fc", "norm", "head"} <= set(layers)
    assert layers["head"]["forward_count"] == steps
    history = {h["full_name"]: h for h in final["history"]}
    assert "blocks.1.fc" in history
    assert len(history["blocks.1.fc"]["latency_ms"]) == len(history["blocks.1.fc"]["steps"]) > 1
    assert all(x is None or x >= 0 for x in history["blocks.1.fc"]["latency_ms"])


def test_json_filters_apply(live, viewers):
    d = live.daemon
    t = live.train("--step-delay", "0.02")
    t.wait_steps(3)
    v = viewers(["--remote", d.rpc, "--json", "--type", "Linear", "--filter", "blocks.*"],
                env=d.env())
    t.finish()
    code, out, err = v.wait()
    assert code == 0, err
    final = json.loads(out.splitlines()[-1])
    assert sorted(l["full_name"] for l in final["record"]["layers"]) == ["blocks.0.fc",
                                                                        "blocks.1.fc"]
    assert sorted(h["full_name"] for h in final["history"]) == ["blocks.0.fc", "blocks.1.fc"]


def test_sigint_ends_a_live_watch_with_exit_0(live, viewers):
    d = live.daemon
    t = live.train("--step-delay", "0.05")
    t.wait_steps(3)
    v = viewers(["--remote", d.rpc, "latest", "--interval", "0.1"], env=d.env())
    wait_until(lambda: "connected to " + d.rpc in v.output, "the first frame",
               on_timeout=lambda: v.output)
    v.proc.send_signal(signal.SIGINT)
    code, out, err = v.wait()
    assert code == 0, err
    assert "\x1b" not in out  # Piped: plain frames.
    assert "+-- blocks (Sequential)" in out
    t.finish()


def test_job_ranks_side_by_side_with_the_straggler_flagged(live, viewers):
    d = live.daemon
    job = "job-e2e"
    v = viewers(["--job", job, "--remote", d.rpc, "--json", "--interval", "0.2",
                 "--connect-timeout", "60"], env=d.env())
    ranks = [live.train("--step-delay", "0.02", "--min-steps", "20",
                        *(["--slow-ms", "20"] if rank == 1 else []),
                        env={"TRACETORCH_JOB": job, "RANK": str(rank), "WORLD_SIZE": "3"})
             for rank in range(3)]

    def slow_ranks(doc):
        """The ranks whose blocks.0 latency is flagged in a job document."""
        return {x["details"]["rank"] for x in doc["divergences"]
                if x["layer"] == "blocks.0" and x["details"]["metric"] == "latency_ms"}

    def flagged():
        for doc in reversed(v.docs()):
            if doc["type"] == "job" and len(doc["ranks"]) == 3 and 1 in slow_ranks(doc):
                return doc
        return None

    doc = wait_until(flagged, "a job update with 3 ranks and the straggler's blocks.0 flagged",
                     on_timeout=lambda: v.output[-3000:] + d.log_text())
    assert doc["job_id"] == job
    assert [r["session"]["rank"] for r in doc["ranks"]] == [0, 1, 2]
    assert all(x["type"] == "rank_divergence" for x in doc["divergences"])
    for t in ranks:
        t.finish()
    code, out, err = v.wait()
    assert code == 0, err
    final = json.loads(out.splitlines()[-1])
    assert final["type"] == "job" and final["ended"] is True
    assert all(r["session"]["state"] == "finished" for r in final["ranks"])
    # Over the whole run the straggler's slow layer is flagged on that rank only: a busy machine
    # can slow any rank for a moment, not for the whole run. (Sub-0.1 ms layers may be flagged on
    # any rank: noise, not what this checks.)
    assert slow_ranks(final) == {1}, final["divergences"]


def test_unknown_session_exits_2_with_one_line(live):
    r = run("watch", "--remote", live.daemon.rpc, "no-such-session", "--connect-timeout", "0.3",
            env=live.daemon.env())
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.startswith("tracetorch: unknown session 'no-such-session'"), r.stderr
    assert r.stderr.count("\n") == 1


def test_unreachable_daemon_exits_2_with_one_line(tmp_path):
    sock = str(tmp_path / "nobody.sock")
    r = run("watch", "--remote", sock, "--connect-timeout", "0.3")
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.startswith(f"tracetorch: cannot reach tracetorchd at {sock}"), r.stderr
    assert r.stderr.count("\n") == 1


def test_bad_remote_arguments_exit_2():
    for args in [("watch", "--remote", "/tmp/x.sock", "a", "b"),
                 ("watch", "--job", "j", "--remote", "/tmp/x.sock", "s-1"),
                 ("watch", "--json", "t.json"),
                 ("watch",)]:
        r = run(*args)
        assert r.returncode == 2, args
        assert r.stderr.startswith("tracetorch: ") and r.stderr.count("\n") == 1, (args, r.stderr)
