"""End-to-end: the HTML reports of real traced runs, opened in headless Chromium (Selenium with
Debian's chromium and chromium-driver).

Two runs of a small causal decoder (report_train.py, the Python agent) stream to a real tracetorchd:
a clean one, kept as the baseline `main`, and one with a perturbed head and a NaN planted at step
20 (ops="on_nan": its op graph is kept). Reports made from them:
  trace.html       `report --remote RPC latest`: the NaN run with its per-step history and op graph
  diff.html        `diff --remote RPC baseline:main latest --html`: with both histories
  file.html        `report b.json`: a trace file (no history)
  local_diff.html  `diff a.json b.json --html`
  big.html         `report` of a 10,000-layer trace, with hostile layer names
Each page must load without a console error, draw its charts (canvas not blank) and filter; a
hostile layer name must stay text. Screenshots (and timings.json, with the 10,000-layer page's
size and times) go to $TRACETORCH_TEST_OUT. Skipped without chromium, chromium-driver or
python3-selenium (tools/bootstrap installs them).
"""

import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from conftest import BIN, clean_env, run
from live_daemon import PYTHON, Daemon, require_live_setup

OUT = pathlib.Path(os.environ.get("TRACETORCH_TEST_OUT", "/tmp/tracetorch_report_browser"))
TRAIN = str(pathlib.Path(__file__).with_name("report_train.py"))
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

# Layer names are user data. (No '.' in them: a dotted name would nest in the tree, and the row
# shows the last component.)
HOSTILE = ['<img src=x onerror="pwned=1">', '</script><script>pwned=2</script>',
           "a&amp;b\u2028\"'"]


def _require_browser():
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("chromium and chromium-driver are not installed (tools/bootstrap)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("python3-selenium is not installed (tools/bootstrap)")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The five pages, made once for the module."""
    require_live_setup()
    _require_browser()
    OUT.mkdir(parents=True, exist_ok=True)
    work = tmp_path_factory.mktemp("reports")
    daemon = Daemon().start()
    try:
        env = daemon.env()
        def train(out, *extra):
            p = subprocess.run([PYTHON, TRAIN, "--out", str(out), *extra], env=env,
                               capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, p.stdout + p.stderr
        train(work / "a.json", "--steps", "30")
        r = run("baseline", "set", "main", "latest", "--remote", daemon.rpc, env=env)
        assert r.returncode == 0, r.stderr
        assert "with per-step history" in r.stdout
        train(work / "b.json", "--steps", "30", "--perturb", "20", "--nan-at", "20")

        pages = {}
        r = run("report", "--remote", daemon.rpc, "latest", "-o", str(work / "trace.html"), env=env)
        assert r.returncode == 0, r.stderr
        assert "with per-step history" in r.stdout
        pages["trace"] = work / "trace.html"
        r = run("diff", "--remote", daemon.rpc, "baseline:main", "latest", "--html",
                str(work / "diff.html"), env=env)
        assert r.returncode == 1, r.stderr  # Regressions found.
        assert "HTML report written to" in r.stderr
        pages["diff"] = work / "diff.html"
        r = run("report", str(work / "b.json"), "-o", str(work / "file.html"))
        assert r.returncode == 0, r.stderr
        pages["file"] = work / "file.html"
        r = run("diff", str(work / "a.json"), str(work / "b.json"), "--html",
                str(work / "local_diff.html"))
        assert r.returncode == 1, r.stderr
        pages["local_diff"] = work / "local_diff.html"
    finally:
        daemon.cleanup()

    # A 10,000-layer trace: a deep tree (100 blocks x 99 layers), some hostile names.
    big = json.loads((work / "b.json").read_text())
    template = big["layers"][0]
    layers = []
    for b in range(100):
        for i in range(99):
            name = HOSTILE[i % len(HOSTILE)] if b == 7 and i < len(HOSTILE) else f"l{i}"
            layers.append(dict(template, name=name, full_name=f"model.block{b}.{name}", depth=3,
                               type="Linear" if i % 3 else "GELU",
                               latency_ms_mean=0.001 * ((b * 99 + i) % 997)))
        layers.append(dict(template, name=f"block{b}", full_name=f"model.block{b}", depth=2,
                           type="Block"))
    big["layers"] = layers
    big["warnings"] = [{"type": "dead_layer", "severity": "warning", "layer": layers[7 * 100]["full_name"],
                        "message": HOSTILE[0], "details": {}}]
    (work / "big.json").write_text(json.dumps(big))
    assert len(layers) == 10000
    t0 = time.monotonic()
    r = run("report", str(work / "big.json"), "-o", str(work / "big.html"))
    written_s = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    pages["big"] = work / "big.html"
    pages["big_write_s"] = written_s
    for name in ("trace", "diff", "file", "local_diff", "big"):
        shutil.copy(pages[name], OUT / f"{name}.html")
    return pages


@pytest.fixture(scope="module")
def browser(reports):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--force-device-scale-factor=1"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def open_page(driver, path):
    """Loads `path` and waits for the page's script to finish (failing on a console error)."""
    driver.get(pathlib.Path(path).as_uri())
    deadline = time.monotonic() + 60
    while not driver.execute_script("return !!(window.ttReport && window.ttReport.ready)"):
        assert time.monotonic() < deadline, "the page's script did not finish"
        errors = console_errors(driver)
        assert not errors, errors
        time.sleep(0.05)


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def inked_canvases(driver):
    """For each canvas on the page: how many of its pixels are not transparent."""
    return driver.execute_script("""
        return Array.from(document.querySelectorAll('canvas')).map((c) => {
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0;
          for (let i = 3; i < d.length; i += 4) if (d[i] > 0) ++n;
          return n;
        });""")


def screenshot(driver, name):
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(height, 1000), 6000))
    driver.save_screenshot(str(OUT / f"{name}.png"))
    driver.set_window_size(1400, 1000)


def set_value(driver, css, value):
    driver.execute_script("""
        const e = document.querySelector(arguments[0]);
        e.value = arguments[1];
        e.dispatchEvent(new Event(e.tagName === 'SELECT' ? 'change' : 'input'));""", css, value)


def text(driver, css):
    return driver.execute_script("return document.querySelector(arguments[0]).textContent", css)


def wait_text(driver, css, predicate, what):
    deadline = time.monotonic() + 10
    while True:
        t = text(driver, css)
        if predicate(t):
            return t
        assert time.monotonic() < deadline, f"{what}: {t!r}"
        time.sleep(0.02)


def rows(driver):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('.vrow')).map((r) => r.textContent)")


def test_trace_report_of_a_live_session(reports, browser):
    open_page(browser, reports["trace"])
    assert "NaN origin: blocks.0.ff at step 20" in text(browser, "#nan-origin")
    # The anomalies: the NaN origin's first.
    first = browser.execute_script(
        "return document.querySelector('#anomalies tr:nth-child(2) td:nth-child(3)').textContent")
    assert first == "blocks.0.ff"
    # Charts: the slowest layers, and the four per-step charts of the selected layer (the origin).
    inked = inked_canvases(browser)
    assert len(inked) >= 5, inked
    assert all(n > 500 for n in inked), inked
    assert "Per-step history: blocks.0.ff" in text(browser, "#charts")
    # The op graph, the origin op outlined.
    assert browser.execute_script("return document.getElementById('op-graph-img').naturalWidth") > 0
    assert "outlined in orange" in text(browser, "#op-graph")
    screenshot(browser, "trace")

    # Filters: by name, by type; sorting by latency puts the slowest first.
    total = text(browser, "#tree-count")
    set_value(browser, "#filter-name", "ff")
    wait_text(browser, "#tree-count", lambda t: t.startswith("2 of"), "name filter")
    assert any("ff" in r for r in rows(browser))
    set_value(browser, "#filter-name", "")
    set_value(browser, "#filter-type", "LayerNorm")
    wait_text(browser, "#tree-count", lambda t: "match" in t, "type filter")
    assert all("LayerNorm" in r or "(container)" in r or "Encoder" in r or "Block" in r
               or "Decoder" in r for r in rows(browser))
    set_value(browser, "#filter-type", "")
    set_value(browser, "#sort", "lat")
    wait_text(browser, "#tree-count", lambda t: t == total, "filters cleared")
    # A click on a row charts that layer.
    browser.execute_script("document.querySelectorAll('.vrow')[0].click()")
    assert "Per-step history:" in text(browser, "#charts")
    assert all(n > 500 for n in inked_canvases(browser))
    assert not console_errors(browser)


def test_diff_report_verdict_first_with_both_histories(reports, browser):
    open_page(browser, reports["diff"])
    verdict = text(browser, "#verdict")
    assert "Regressions found — exit status 1" in verdict
    assert "critical" in verdict
    assert browser.execute_script("return document.querySelector('main > :not(noscript)').id") \
        == "verdict"
    assert text(browser, "#changes-critical")
    inked = inked_canvases(browser)
    assert len(inked) == 4 and all(n > 500 for n in inked), inked
    # Both histories on one chart: two datasets.
    assert browser.execute_script(
        "return window.ttReport.charts.every((c) => c.data.datasets.length === 2)")
    screenshot(browser, "diff")
    before = text(browser, "#tree-count")
    set_value(browser, "#filter-name", "blocks.0")
    wait_text(browser, "#tree-count", lambda t: t != before, "name filter")
    assert rows(browser) and all("blocks.0" in r for r in rows(browser))
    browser.execute_script("document.getElementById('only-changed').click()")
    time.sleep(0.2)
    assert all("unchanged" not in r for r in rows(browser))
    assert not console_errors(browser)


def test_file_report_and_local_diff(reports, browser):
    open_page(browser, reports["file"])
    assert "no per-step history" in text(browser, "#history").lower()
    inked = inked_canvases(browser)
    assert inked and all(n > 500 for n in inked), inked
    screenshot(browser, "file")
    open_page(browser, reports["local_diff"])
    assert "Regressions found — exit status 1" in text(browser, "#verdict")
    screenshot(browser, "local_diff")
    assert not console_errors(browser)


def test_ten_thousand_layers_open_and_filter_and_hostile_names_stay_text(reports, browser):
    size = pathlib.Path(reports["big"]).stat().st_size
    browser.get("about:blank")
    start = time.monotonic()
    open_page(browser, reports["big"])
    ready_s = time.monotonic() - start
    paint = browser.execute_script("""
        const p = performance.getEntriesByType('paint').find((e) => e.name === 'first-contentful-paint');
        return p ? p.startTime : null;""")
    assert browser.execute_script("return window.pwned") is None
    assert "10,000 layers" in text(browser, "#tree-count") or "10000" in text(browser, "#tree-count")
    assert browser.execute_script("return window.ttReport.lists.tree.rendered()") < 200
    # Expand everything: 10,100 rows (100 block nodes are synthetic or real), still few in the DOM.
    browser.execute_script("document.getElementById('expand-all').click()")
    assert browser.execute_script("return window.ttReport.lists.tree.size()") >= 10000
    assert browser.execute_script("return window.ttReport.lists.tree.rendered()") < 200
    # Filter and time it (from the keystroke, including the 120 ms debounce).
    t0 = time.monotonic()
    set_value(browser, "#filter-name", "*block42.l1*")  # A glob matches the whole name.
    wait_text(browser, "#tree-count", lambda t: t.startswith("11 of"), "10k name filter")
    filter_s = time.monotonic() - t0
    # The hostile names, found by the filter, are shown as text.
    set_value(browser, "#filter-name", "block7.")
    wait_text(browser, "#tree-count", lambda t: "match" in t and not t.startswith("11 of"),
              "hostile filter")
    shown = " ".join(rows(browser))
    for name in HOSTILE[:2]:
        assert name in shown
    assert browser.execute_script("return document.querySelectorAll('main img[src=x]').length") == 0
    assert browser.execute_script("return window.pwned") is None
    screenshot(browser, "big")
    assert not console_errors(browser)
    timings = {"layers": 10000, "html_bytes": size, "write_s": round(reports["big_write_s"], 3),
               "first_contentful_paint_ms": paint, "ready_s": round(ready_s, 3),
               "filter_s": round(filter_s, 3)}
    (OUT / "timings.json").write_text(json.dumps(timings, indent=2))
    print(json.dumps(timings))
