"""End-to-end: `tracetorch watch --job JOB --remote A,B,C` over three real tracetorchd daemons (one
per "node", on loopback sockets) while six traced training runs (the Python agent, TRACETORCH_JOB
and RANK set) stream to them, two ranks each. One rank is made slow: the merged view flags it, and
the JSON says so. One daemon then goes away: it shows as such and the others keep updating."""

import json
import signal

import pytest

from conftest import BIN, Spawned
from live_daemon import Daemon, Training, require_live_setup, wait_until

SLOW_RANK = 4


class Viewer(Spawned):
    def __init__(self, args, env):
        super().__init__([BIN, "watch", *args], env=env)

    def docs(self):
        text = self.output
        return [json.loads(l) for l in text[: text.rfind("\n") + 1].splitlines() if l]


@pytest.fixture
def fleet(background):
    require_live_setup()
    daemons = []
    trainings = []
    try:
        for _ in range(3):
            daemons.append(Daemon().start())

        class Fleet:
            pass

        f = Fleet()
        f.daemons = daemons
        f.train = lambda daemon, *a, env=None: trainings.append(
            Training(daemon, *a, env=env)) or trainings[-1]
        f.view = lambda args, env: background(Viewer, args, env)
        yield f
    finally:
        for t in trainings:
            t.kill()
        for d in daemons:
            d.cleanup()


def slow_ranks(doc):
    """The ranks whose blocks.0 forward latency is flagged in a merged job document."""
    return {x["details"]["rank"] for x in doc["divergences"]
            if x["layer"] == "blocks.0" and x["details"]["metric"] == "latency_ms"}


def test_a_job_over_three_daemons_flags_the_slow_rank_and_outlives_a_daemon(fleet):
    job = "fleet-e2e"
    daemons = fleet.daemons
    addresses = [d.rpc for d in daemons]
    v = fleet.view(["--job", job, "--remote", ",".join(addresses), "--json", "--interval", "0.2"],
                   env=daemons[0].env())
    for rank in range(6):
        fleet.train(daemons[rank % 3], "--step-delay", "0.02",
                    *(["--slow-ms", "20"] if rank == SLOW_RANK else []),
                    env={"TRACETORCH_JOB": job, "RANK": str(rank), "WORLD_SIZE": "6"})

    def flagged():
        for doc in reversed(v.docs()):
            if len(doc["ranks"]) == 6 and SLOW_RANK in slow_ranks(doc):
                return doc
        return None

    doc = wait_until(flagged, "a merged update with 6 ranks and the slow rank's blocks.0 flagged",
                     on_timeout=lambda: v.output[-3000:])
    assert doc["type"] == "job" and doc["kind"] == "merged" and doc["job_id"] == job
    assert [r["session"]["rank"] for r in doc["ranks"]] == list(range(6))
    assert [r["daemon"] for r in doc["ranks"]] == [addresses[r % 3] for r in range(6)]
    assert SLOW_RANK in doc["flagged_ranks"]
    assert [d["status"] for d in doc["daemons"]] == ["connected"] * 3
    assert [d["ranks"] for d in doc["daemons"]] == [[0, 3], [1, 4], [2, 5]]

    # The third daemon goes away: it is shown away (its last ranks kept); the others keep updating.
    daemons[2].stop()

    def away():
        for doc in reversed(v.docs()):
            if doc["daemons"][2]["status"] == "away":
                return doc
        return None

    gone = wait_until(away, "the third daemon shown away", on_timeout=lambda: v.output[-3000:])
    assert [d["status"] for d in gone["daemons"][:2]] == ["connected", "connected"]
    assert len(gone["ranks"]) == 6

    def later():
        for doc in reversed(v.docs()):
            if doc["sequence"] > gone["sequence"] and doc["daemons"][2]["status"] == "away" and \
                    doc["ranks"][0]["session"]["events"] > gone["ranks"][0]["session"]["events"]:
                return doc
        return None

    wait_until(later, "rank 0 (first daemon) still updating", on_timeout=lambda: v.output[-3000:])
    v.proc.send_signal(signal.SIGINT)
    code, _, err = v.wait(timeout=60)
    assert code == 0, err
