"""Every shipped scenario, each with a client that fails it and one that passes it, in one HTML
report, opened in a real browser: each failed scenario's picture carries the evidence of its
failure (its failed check's moments drawn and highlighted when the check is picked). With
NETCOND_SCREENSHOTS=Docs/images (scripts/test) the failed scenarios' pictures are saved as
gallery-NAME.png: Docs/gallery.md shows them. Runs from the project's folder with relative paths,
so the report holds no path of this machine."""
import base64
import concurrent.futures
import glob
import json
import os

import pytest

from conftest import browser, run, screenshot  # noqa: F401  (browser: a fixture)

pytest.importorskip("selenium", reason="selenium is not installed (scripts/test installs it)")
from selenium.webdriver.common.by import By  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CURL = 'curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'
WGET = 'wget -q -O "$NETCOND_OUTPUT" "$NETCOND_URL"'
POST = 'curl -sS --retry 3 --retry-all-errors {key}-H "Content-Type: application/json" -d "{{\\"item\\": 1}}" "$NETCOND_URL"'
EACH_ASSET = ('curl -fsS -w "%{stderr}loaded %{url_effective}\\n" -o "$NETCOND_OUTPUT" "$NETCOND_URL" && '
              'for u in $ASSETS; do curl -fsS -w "%{stderr}loaded %{url_effective}\\n" -o /dev/null "$u" || exit 1; done')
PROBE_THEN_GET = ('until [ "$(curl -s -o /dev/null -w "%{http_code}" http://connectivitycheck.gstatic.com/generate_204)" = 204 ]; '
                  'do sleep 1; done; curl -fsS -o "$NETCOND_OUTPUT" "$NETCOND_URL"')

# scenario: (a client that fails it, one that passes it; None: the scenario's own command)
CLIENTS = {
    "resume-after-dropout": (CURL, WGET),
    "resume-after-reset-storm": ('curl -sS --retry 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"', WGET),
    "backoff-connection-refused": ('curl -sS --retry 30 --retry-delay 1 --retry-all-errors -o "$NETCOND_OUTPUT" "$NETCOND_URL"',
                                   'curl -sS --retry 5 --retry-all-errors -o "$NETCOND_OUTPUT" "$NETCOND_URL"'),
    "hang-forever": (CURL, 'curl -sS --max-time 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"'),
    "stall-mid-body": (CURL, 'curl -sS --speed-limit 1024 --speed-time 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"'),
    "slow-server-45s": (CURL, 'curl -sS --max-time 30 -o "$NETCOND_OUTPUT" "$NETCOND_URL"'),
    "offline-then-back": ('for i in $(seq 60); do curl -fsS --max-time 1 -o "$NETCOND_OUTPUT" "$NETCOND_URL" && break; done',
                          'curl -sS --retry 5 --max-time 3 -o "$NETCOND_OUTPUT" "$NETCOND_URL"'),
    "idempotent-post-lost-response": (POST.format(key=""), POST.format(key='-H "Idempotency-Key: order-42" ')),
    "captive-then-login": (CURL, PROBE_THEN_GET),
    "captive-during-resume": ('python3 "$CLIENTS/resume.py"', 'python3 "$CLIENTS/resume.py" careful'),
    "edge-page-load": (EACH_ASSET, None),
    "backoff-503-retry-after": ('wget -q --tries=10 --waitretry=0 --retry-on-http-error=503 -O "$NETCOND_OUTPUT" "$NETCOND_URL"',
                                'curl -sS --retry 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"'),
    "rate-falls-mid-download": ('python3 "$CLIENTS/adaptive.py" estimate',
                                'python3 "$CLIENTS/adaptive.py" progress'),
    "third-party-blackholed": ('curl -sS -o /dev/null "$ANALYTICS"; curl -fsS -o "$NETCOND_OUTPUT" "$FEED" && echo "shown feed" >&2',
                               None),
    "cdn-refuses-fallback": ('curl -fsS --retry 3 --retry-all-errors -o "$NETCOND_OUTPUT" "$PRIMARY"', None),
    "handover-wifi-to-cellular": (CURL, None),
    "ipv6-only-nat64": ('curl -4 -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"', None),
    "dns-fails-then-recovers": (CURL, None),
    "firewall-holds-first-connection": (CURL, None),
    "api-slow-static-fast": ('curl -fsS -o "$NETCOND_OUTPUT" "$API" && for u in $IMAGES; do curl -fsS -o /dev/null "$u" || exit 1; done',
                             None),
    "revalidate-unchanged": ('for i in 1 2 3; do curl -fsS -o "$NETCOND_OUTPUT" "$NETCOND_URL" || exit; sleep 1; done', None),
    "parallel-page-load": ('for u in $IMAGES; do curl -fsS -o /dev/null "$u" || exit 1; done', None),
    "offline-queue": ('python3 "$CLIENTS/offline_queue.py" drop', 'python3 "$CLIENTS/offline_queue.py" queue'),
    "radio-polling": ('sh "$CLIENTS/feed.sh" poll 3', None),
}


def one_run(name, client, folder, label):
    report = os.path.join(folder, f"{name}-{label}.json")
    command = ["run", f"Scenarios/{name}.yaml", "--seed", "3", "--quiet", "--json", report]
    if client is not None:
        command += ["--", "sh", "-c", client]
    # The clients' folder by a variable: the command (and so the report) names no path of this machine.
    result = run(command, timeout=180, cwd=ROOT, env={"CLIENTS": os.path.join(ROOT, "Tests", "loopback", "clients")})
    return name, label, result, report


def test_every_shipped_scenario_failed_and_passed_in_one_report(browser, tmp_path):
    shipped = sorted(os.path.basename(p)[:-len(".yaml")] for p in glob.glob(os.path.join(ROOT, "Scenarios", "*.yaml")))
    assert shipped == sorted(CLIENTS), "a shipped scenario without its clients here, or the reverse"
    runs = [(name, client, label) for name in shipped for label, client in zip(("failed", "passed"), CLIENTS[name])]
    # The slowest first; four at a time (most of a run is waiting on the link or a client's time-out).
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda r: one_run(r[0], r[1], str(tmp_path), r[2]), runs))
    scenarios = []
    for name, label, result, report in done:
        assert result.returncode == (1 if label == "failed" else 0), (name, label, result.stdout, result.stderr)
        part = json.loads(open(report).read())
        scenarios += part["scenarios"]
    merged = dict(part, scenarios=scenarios)
    merged_path = tmp_path / "all.json"
    merged_path.write_text(json.dumps(merged))
    page = tmp_path / "all.html"
    drawn = run(["report", str(merged_path), "--html", str(page)])
    assert drawn.returncode == 0, drawn.stderr
    html = page.read_text()
    assert "/tmp/" not in html and ROOT not in html, "no path of this machine"

    browser.get(page.as_uri())
    assert browser.title.startswith(f"netcond: {len(shipped)} of {2 * len(shipped)} scenarios passed")
    sections = browser.find_elements(By.CSS_SELECTOR, "section.scenario")
    assert len(sections) == 2 * len(shipped)
    pictured = 0
    for section in sections:
        if section.get_attribute("data-verdict") != "failed":
            continue
        name = section.find_element(By.CSS_SELECTOR, "h2").text.lstrip("✗ ").strip()
        failed = section.find_elements(By.CSS_SELECTOR, "li.check.failed a.check-link")
        assert failed, name
        # The first failed check's evidence is drawn: its moments are marks on this timeline.
        link = failed[0]
        assert link.get_attribute("data-marks").strip(), (name, link.text)
        browser.execute_script("arguments[0].scrollIntoView()", section)
        link.click()
        shown = browser.execute_script(
            "return [...arguments[0].querySelectorAll('line.check-mark')]"
            ".filter(m => getComputedStyle(m).display !== 'none').length", section)
        assert shown >= 1, (name, link.text)
        folder = os.environ.get("NETCOND_SCREENSHOTS")
        if folder:
            # The section as laid out on the page, whatever part of it the window shows.
            box = browser.execute_script(
                "const r = arguments[0].getBoundingClientRect();"
                "return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height};", section)
            shot = browser.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True, "clip": dict(box, scale=1)})
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"gallery-{name}.png"), "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        pictured += 1
    assert pictured == len(shipped)
    screenshot(browser, "gallery-suite")  # the whole report's first screen
