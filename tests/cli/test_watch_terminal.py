"""End-to-end: `tracetorch watch --remote` in a real terminal (tmux), checked the way a person would
see it: the layer tree with sparklines, the counters and the connection line; a NaN injected
mid-training showing up live as the NaN origin at the top of the anomalies; a daemon restart that
the view reports ("reconnecting") and survives; and the final state with exit code 0 when the
session ends. Every step waits on what the pane shows (polling capture-pane with a deadline).

Set TRACETORCH_TMUX_CAPTURES to a folder to keep the captured screens."""

import os
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import BIN
from live_daemon import DEADLINE_S, live, wait_until  # noqa: F401 (live is a fixture)

TMUX = shutil.which("tmux")
SPARK = re.compile("[▁▂▃▄▅▆▇█]{3,}")

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)")


class Pane:
    """One tmux session (on a private server socket) running a command in a 160x50 terminal."""

    def __init__(self, command, name):
        self.server = f"ttw{os.getpid()}-{name}"
        self.captures = []
        subprocess.run([TMUX, "-u", "-L", self.server, "-f", "/dev/null", "new-session", "-d",
                        "-s", name, "-x", "160", "-y", "50", command], check=True)
        self.target = name

    def capture(self):
        r = subprocess.run([TMUX, "-u", "-L", self.server, "capture-pane", "-p", "-t", self.target],
                           capture_output=True, check=True)
        text = r.stdout.decode("utf-8", errors="replace")
        self.captures.append(text)
        return text

    def wait_for(self, predicate, what):
        """Polls the screen until predicate(screen) is truthy on a settled frame; returns it.

        A capture can show a frame half drawn: the view writes a frame over the previous one in
        place, and tmux may answer capture-pane between two reads of that output (the top rows
        new, the rest the previous frame's; seen once in about 200 runs under load). A screen
        counts only when two captures in a row are the same: the view draws at most every
        --interval (0.2 s), far longer than the 20 ms between captures."""
        found = {}
        previous = [None]

        def check():
            screen = self.capture()
            settled = screen == previous[0]
            previous[0] = screen
            if settled and predicate(screen):
                found["screen"] = screen
                return True
            return False

        wait_until(check, what, on_timeout=lambda: "last screen:\n" + self.captures[-1])
        return found["screen"]

    def close(self):
        subprocess.run([TMUX, "-L", self.server, "kill-server"], capture_output=True)
        folder = os.environ.get("TRACETORCH_TMUX_CAPTURES")
        if folder:
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"{self.target}.txt"), "w") as f:
                f.write("\n=====\n".join(self.captures[-200:]))


def updates_shown(screen):
    m = re.search(r"updates (\d+)", screen)
    return int(m.group(1)) if m else -1


def events_shown(screen):
    m = re.search(r"events (\d+)", screen)
    return int(m.group(1)) if m else -1


def test_live_view_in_a_terminal(live):
    d = live.daemon
    t = live.train("--step-delay", "0.1")
    t.wait_steps(3)

    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in
                   [("TRACETORCH_DAEMON_RPC", d.rpc), ("TERM", "xterm-256color"),
                    ("LANG", "C.UTF-8")])
    command = (f"env -u NO_COLOR {env} {shlex.quote(BIN)} watch --remote {shlex.quote(d.rpc)} "
               f"latest --interval 0.2; echo WATCH-EXIT=$?; sleep 600")
    pane = Pane(command, "view")
    try:
        # What a person sees first: title, connection line, counters, model panel, tree.
        screen = pane.wait_for(
            lambda s: "● connected to " + d.rpc in s and "fc (Linear)" in s and SPARK.search(s)
            and events_shown(s) > 0,
            "the first live frame with sparklines")
        lines = screen.splitlines()
        assert lines[0].startswith("tracetorch watch · session ") and "TrainNet" in lines[0]
        assert re.search(r"events \d+ · dropped \d+ · rejected \d+ · updates \d+", screen)
        assert "Model Summary" in screen
        assert "NaN origin" not in screen  # Not yet.
        tree = [l for l in lines if "(Linear)" in l or "(Sequential)" in l or "(LayerNorm)" in l]
        assert any(l.startswith("├── blocks (Sequential)") for l in tree), tree
        fc = [l for l in tree if "└── fc (Linear)" in l or "├── fc (Linear)" in l]
        assert fc and all("lat " in l and "std " in l and "grad " in l for l in fc), tree
        assert all(SPARK.search(l) for l in fc), fc
        assert all(len(l) <= 160 for l in lines)

        # The counters move while the run is live.
        before = updates_shown(screen)
        pane.wait_for(lambda s: updates_shown(s) > before + 2, "more updates")

        # A NaN mid-training: its origin appears live, at the top of the anomalies.
        t.poison()
        screen = pane.wait_for(lambda s: "NaN origin: blocks.1.fc" in s, "the NaN origin")
        lines = screen.splitlines()
        origin = next(i for i, l in enumerate(lines) if "NaN origin: blocks.1.fc" in l)
        table = next(i for i, l in enumerate(lines) if "Warnings & Anomalies" in l)
        assert origin < table, screen
        rows = [l for l in lines[table:] if l.startswith("│") and "Severity" not in l]
        assert rows and "blocks.1.fc" in rows[0], screen  # The origin's anomaly leads the table.
        assert re.search(r"│  NaN origin +blocks\.1\.fc at step \d+ \(NaN\)", screen)  # The panel too.
        nan_fc = [l for l in lines if "── fc (Linear)" in l]
        assert any("NaN out" in l and "!" in l for l in nan_fc), nan_fc  # Flagged sparkline steps.

        # The daemon restarts: the view says so, keeps the last state, and comes back.
        events_before = events_shown(screen)
        d.stop()
        screen = pane.wait_for(lambda s: "reconnecting" in s, "the reconnecting line")
        assert "NaN origin: blocks.1.fc" in screen  # The last state stays on screen.
        d.start()
        screen = pane.wait_for(
            lambda s: ("● reconnected to " in s or "● session resumed" in s)
            and events_shown(s) > events_before,
            "data again after the restart")
        shown = updates_shown(screen)
        pane.wait_for(lambda s: updates_shown(s) > shown, "updates after the restart")

        # The session ends: the final state, then exit code 0.
        steps_before_end = t.steps()
        t.finish()
        screen = pane.wait_for(lambda s: "WATCH-EXIT=" in s, "the view to exit")
        assert "WATCH-EXIT=0" in screen, screen
        assert "■ session finished" in screen
        assert "NaN origin: blocks.1.fc" in screen
        assert t.steps() >= steps_before_end
    finally:
        pane.close()
