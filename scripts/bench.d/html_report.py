"""Bench item 10: the HTML report of a 100-scenario suite, its size and how long the headless browser
takes to open it (targets: under 5 MB, under 2 s).

The suite is one real run of the shipped resume-after-dropout scenario (wget as the client, its
JSON report), made as heavy as a scenario's evidence gets (2,000 output lines of 200 characters, a
minute of delivered-bytes samples, 50 requests) and repeated under 100 names with every third one
marked failed. `netcond
report` draws it; Debian's chromium (headless, through selenium) opens it three times; the time is
the page's own navigation timing (navigationStart to loadEventEnd)."""
import copy
import json
import os
import shutil
import statistics
import subprocess
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCENARIO = os.path.join(ROOT, "Scenarios", "resume-after-dropout.yaml")
SCENARIOS = 100
LOADS = 3
MAX_BYTES = 5_000_000
MAX_SECONDS = 2.0


def browser(profile):
    """A headless chromium through selenium, or the reason there is none. `profile`: its profile
    folder, in the bench's own temporary folder (left to itself, chromium leaves an
    org.chromium.Chromium.* folder in /tmp for each browser started)."""
    try:
        from selenium import webdriver
    except ImportError:
        return None, "selenium is not installed (pip install selenium)"
    chromium, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not chromium or not driver:
        return None, "chromium and chromedriver are not installed (apt-get install chromium chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--user-data-dir={profile}"):
        options.add_argument(argument)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver)), None


def load_times(page, timelines):
    """Opens `page` LOADS times in the headless browser: the seconds from navigationStart to
    loadEventEnd of each (or None and why there is no browser); checks it drew `timelines`."""
    chrome, why = browser(os.path.join(os.path.dirname(page), "chromium-profile"))
    if chrome is None:
        return None, why
    try:
        times = []
        for _ in range(LOADS):
            chrome.get("file://" + page)
            timing = chrome.execute_script(
                "var t = performance.timing; return [t.navigationStart, t.loadEventEnd, "
                "document.querySelectorAll('svg.timeline').length];")
            if timing[2] != timelines:
                raise RuntimeError(f"the page drew {timing[2]} timelines, not {timelines}")
            times.append((timing[1] - timing[0]) / 1000)
    finally:
        chrome.quit()
    return times, None


def item_html_report(h, t):
    name = "10. HTML report"
    one = os.path.join(h.tmp, "html-one.json")
    r = subprocess.run([h.binary, "run", SCENARIO, "--seed", "3", "--quiet", "--json", one, "--", "sh", "-c",
                        'wget -q -O "$NETCOND_OUTPUT" "$NETCOND_URL"'], capture_output=True, text=True, timeout=120)
    if r.returncode not in (0, 1) or not os.path.exists(one):
        raise RuntimeError(f"the scenario run failed: {r.stderr[-300:]}")
    with open(one) as f:
        report = json.load(f)
    model = report["scenarios"][0]
    # The heaviest a scenario's evidence gets: 2,000 output lines (the most the JSON keeps) of 200
    # characters, a minute of delivered-bytes samples, 50 requests.
    model["output"] = [{"at": i * 0.03, "stderr": i % 7 == 0, "text": f"line {i} " + "x" * 190} for i in range(2000)]
    model["delivered"] = [[i / 10, i * 1000] for i in range(600)]
    model["requests"] = [dict(model["requests"][0], at=i * 1.2, ended=i * 1.2 + 0.5) for i in range(50)]
    scenarios = []
    for i in range(SCENARIOS):
        scenario = copy.deepcopy(model)
        scenario["name"] = f"{model['name']}-{i:03d}"
        if i % 3 == 0:
            scenario["verdict"] = "failed"
            scenario["checks"][-1]["passed"] = False
        scenarios.append(scenario)
    report["scenarios"] = scenarios
    report["passed"] = False
    suite = os.path.join(h.tmp, "html-suite.json")
    with open(suite, "w") as f:
        json.dump(report, f)
    page = os.path.join(h.tmp, "html-suite.html")
    r = subprocess.run([h.binary, "report", suite, "--html", page], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"netcond report failed: {r.stderr[-300:]}")
    size = os.path.getsize(page)
    per = (size / SCENARIOS) / 1000
    t.add(f"{name}: size of a {SCENARIOS}-scenario report", f"{size / 1e6:.2f} MB ({per:.1f} KB a scenario: "
          f"{len(model.get('requests', []))} requests, {len(model.get('output', []))} output lines, "
          f"{len(model.get('delivered', []))} delivered-bytes samples each)",
          "< 5 MB", "PASS" if size < MAX_BYTES else "FAIL")
    times, why = load_times(page, SCENARIOS)
    if times is None:
        t.add(f"{name}: opens in the headless browser", f"skipped: {why}", "< 2 s", "SKIP")
        return
    t.add(f"{name}: opens in the headless browser (navigationStart to loadEventEnd)",
          f"{max(times):.2f} s at most of {LOADS} loads (median {statistics.median(times):.2f} s)",
          "< 2 s", "PASS" if max(times) < MAX_SECONDS else "FAIL")
    long_run(h, t, name, model, report)
    t.notes.append("10: " + __doc__.split("\n\n", 1)[1].replace("\n", " "))


def long_run(h, t, name, model, report):
    """A 10-minute soak of one scenario with 2,000 requests (a page load every 3 s, its assets
    packed into rows): drawn by `netcond report` and opened in the browser, in under 2 s."""
    scenario = copy.deepcopy(model)
    scenario["name"] = "soak-10-minutes"
    scenario["seconds"] = 600.0
    scenario["requests"] = [dict(model["requests"][0], at=round(i * 0.3, 3), responded=round(i * 0.3 + 0.05, 3),
                                 ended=round(i * 0.3 + 0.4, 3), path=f"/asset/{i}") for i in range(2000)]
    scenario["delivered"] = [[i / 10, i * 1000] for i in range(6000)]
    scenario["output"] = [{"at": i * 0.3, "stderr": False, "text": f"line {i}"} for i in range(2000)]
    soak = dict(report, scenarios=[scenario])
    path = os.path.join(h.tmp, "html-soak.json")
    with open(path, "w") as f:
        json.dump(soak, f)
    page = os.path.join(h.tmp, "html-soak.html")
    started = time.monotonic()
    r = subprocess.run([h.binary, "report", path, "--html", page], capture_output=True, text=True, timeout=120)
    drawn = time.monotonic() - started
    if r.returncode != 0:
        raise RuntimeError(f"netcond report failed on the soak: {r.stderr[-300:]}")
    times, why = load_times(page, 1)
    if times is None:
        t.add(f"{name}: a 10-minute run with 2,000 requests", f"skipped: {why}", "< 2 s", "SKIP")
        return
    worst = drawn + max(times)
    t.add(f"{name}: a 10-minute run with 2,000 requests, drawn (netcond report) and opened",
          f"{worst:.2f} s ({drawn:.2f} s to draw, {max(times):.2f} s at most of {LOADS} loads; "
          f"{os.path.getsize(page) / 1e6:.2f} MB)", "< 2 s", "PASS" if worst < MAX_SECONDS else "FAIL")
