"""The live dashboard the control API serves at its root, in a real browser (headless chromium):
the throughput of a running download moves on it, a click on "blackhole" starts an outage that GET
/status reports, what it draws is what netcond measured (read back from the drawn lines), a page
opened late still shows what happened, and no other page can frame it or change anything through it."""
import json
import statistics
import subprocess
import time

import pytest
import requests

from conftest import Proxy, browser, screenshot, stop_process, tmp, wait_until, write_profile  # noqa: F401  (fixtures)

pytest.importorskip("selenium", reason="selenium is not installed (scripts/test installs it)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402


def test_the_dashboard_moves_with_a_download_and_its_buttons_change_the_link(browser):
    proxy = Proxy("3g")
    download = None
    try:
        # About 10 s of 3g's downlink: the graph has something to show while the test looks.
        download = subprocess.Popen(["curl", "-sS", "-o", "/dev/null", "-x", proxy.url,
                                     "http://origin.netcond.test/bytes/2MB"], stderr=subprocess.PIPE)
        browser.get(proxy.control_url + "/")
        assert browser.title == "netcond dashboard"
        rate = browser.find_element(By.ID, "down-rate")
        # The download's throughput appears and the graph gains points, twice a second.
        assert wait_until(lambda: int(rate.text or "0") > 100, seconds=20), rate.text
        def points():  # the page redraws its graphs: read in one step each time
            return len(browser.execute_script("return document.getElementById('graph-down').getAttribute('points')").split())
        before = points()
        assert wait_until(lambda: points() > before, seconds=5)
        assert browser.find_element(By.ID, "profile").text == "3g"
        time.sleep(3)  # a few seconds of graph for the picture
        screenshot(browser, "dashboard")

        browser.find_element(By.ID, "outage-blackhole").click()
        assert wait_until(lambda: json.loads(proxy.ctl("status", "--json").stdout)["outage"] == "blackhole", seconds=10)
        assert wait_until(lambda: browser.find_element(By.ID, "outage").text == "blackhole", seconds=5)
        browser.find_element(By.ID, "outage-end").click()
        assert wait_until(lambda: json.loads(proxy.ctl("status", "--json").stdout)["outage"] is None, seconds=10)
        # A control the run refuses says why on the page.
        browser.find_element(By.ID, "captive-open").click()
        said = browser.find_element(By.ID, "said")
        assert wait_until(lambda: "no captive portal" in said.text, seconds=10), said.text
    finally:
        if download is not None:
            stop_process(download)
        proxy.stop()


def test_no_other_page_can_frame_it_or_drive_it():
    proxy = Proxy("none")
    try:
        page = requests.get(proxy.control_url + "/", timeout=10)
        assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
        assert page.headers["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
        # A page elsewhere posting to it, as a form would or as a script would: refused, nothing changes.
        for headers, body in (({"Origin": "http://evil.example", "Content-Type": "application/json"}, '{"behaviour": "refuse"}'),
                              ({"Content-Type": "text/plain"}, '{"behaviour": "refuse"}')):
            r = requests.post(proxy.control_url + "/outage", data=body, headers=headers, timeout=10)
            assert r.status_code in (403, 415), r.text
        assert json.loads(proxy.ctl("status", "--json").stdout)["outage"] is None
    finally:
        proxy.stop()


READ_PLOT = """
var svg = document.getElementById(arguments[0]), line = document.getElementById(arguments[1]);
return {t0: +svg.getAttribute('data-t0'), t1: +svg.getAttribute('data-t1'), top: +svg.getAttribute('data-top'),
        points: line.getAttribute('points'),
        marks: [].map.call(svg.querySelectorAll('line[data-kind]'), function(m){return [m.getAttribute('data-kind'), +m.getAttribute('x1')];}),
        ticks: [].map.call(svg.querySelectorAll('text.tick'), function(t){return t.textContent;})};
"""


def plot(browser, plot_id, line):
    """One plot as drawn, read in one step (the page redraws twice a second): its axes (time span,
    the top of its scale), the line's points read back as (t, value), its marks and tick labels."""
    drawn = browser.execute_script(READ_PLOT, plot_id, line)
    t0, t1, top = drawn["t0"], drawn["t1"], drawn["top"]
    left, right, high, low = 44, 392, 8, 128  # the plot area in the page's 400 x 150 view box
    points = []
    for point in drawn["points"].split():
        x, y = (float(v) for v in point.split(","))
        points.append((t0 + (x - left) * (t1 - t0) / (right - left), (low - y) * top / (low - high)))
    drawn["values"] = points
    drawn["x"] = lambda t: left + (t - t0) * (right - left) / (t1 - t0)
    return drawn


def test_what_the_dashboard_draws_is_what_netcond_measured_even_opened_late(browser, tmp):
    """A download at a fixed 2 Mbit/s, an outage in the middle, then a profile switch; the page is
    opened only after: every line of every graph, read back from the drawn coordinates, is the
    history netcond kept for that series (throughput down and up, queueing delay down and up,
    lost, retransmitted, connections), the outage is marked where it began, and the profile
    control shows the profile now in force."""
    profile = write_profile(tmp, "fixed", """
name: fixed
down:
  latency: 20ms
  bandwidth: 2Mbit
up:
  latency: 20ms
  bandwidth: 500kbit
""")
    proxy = Proxy(profile)
    download = None
    try:
        download = subprocess.Popen(["curl", "-sS", "-o", "/dev/null", "-x", proxy.url,
                                     "http://origin.netcond.test/bytes/1500KB"], stderr=subprocess.PIPE)
        time.sleep(2.5)
        assert proxy.ctl("outage", "blackhole").returncode == 0
        time.sleep(1.5)
        assert proxy.ctl("outage", "end").returncode == 0
        download.wait(60)
        assert proxy.ctl("profile", "edge").returncode == 0
        time.sleep(1.2)

        browser.get(proxy.control_url + "/")
        assert wait_until(lambda: browser.execute_script(
            "var l = document.getElementById('graph-down'); return l ? l.getAttribute('points') : ''").count(",") > 10, seconds=10)
        history = requests.get(proxy.control_url + "/history", timeout=10).json()
        samples = {round(s["t"], 3): s for s in history["samples"]}
        # What netcond measured: never above the link's 2 Mbit/s (a loaded machine may fall short
        # of it: the rate's accuracy is measured in scripts/bench, not here).
        busy = [s["down_kbps"] for s in history["samples"] if s["down_kbps"] > 100]
        assert busy and statistics.median(busy) <= 2100, busy
        lines = [("plot-throughput", "graph-down", "down_kbps"), ("plot-throughput", "graph-up", "up_kbps"),
                 ("plot-queue", "graph-queue-down", "queue_down_ms"), ("plot-queue", "graph-queue-up", "queue_up_ms"),
                 ("plot-loss", "graph-lost", "lost_per_s"), ("plot-loss", "graph-retx", "retransmitted_per_s"),
                 ("plot-connections", "graph-connections", "connections_open")]
        for plot_id, line, field in lines:
            drawn = plot(browser, plot_id, line)
            matched = 0
            for t, value in drawn["values"]:
                nearest = min(samples, key=lambda st: abs(st - t))
                if abs(nearest - t) > 0.05:
                    continue  # drawn after the history was read
                matched += 1
                assert abs(samples[nearest][field] - value) <= drawn["top"] * 0.005 + 1e-6, (line, t, value, samples[nearest])
            assert matched >= 10, (line, matched, len(drawn["values"]))
        # The series are told apart: up is not down.
        up = [v for _, v in plot(browser, "plot-throughput", "graph-up")["values"]]
        down = [v for _, v in plot(browser, "plot-throughput", "graph-down")["values"]]
        assert max(up) < max(down) / 4, (max(down), max(up))
        outage = [m for m in history["marks"] if m["kind"] == "outage"]
        # Set 2.5 s after the start, plus the start of curl and `netcond ctl` on a loaded machine.
        assert len(outage) == 1 and 2.0 <= outage[0]["t"] <= 10.0, history["marks"]
        throughput = plot(browser, "plot-throughput", "graph-down")
        drawn_marks = [x for kind, x in throughput["marks"] if kind == "outage"]
        assert len(drawn_marks) == 1 and abs(throughput["x"](outage[0]["t"]) - drawn_marks[0]) < 0.5, throughput["marks"]
        assert [m["kind"] for m in history["marks"]].count("outage-end") == 1
        # The axes say what they show, with units: seconds below, the scale's top and 0 beside.
        ticks = throughput["ticks"]
        assert "0 s" in ticks and "0" in ticks and any(t.endswith("k") or t.isdigit() for t in ticks if t != "0"), ticks
        assert Select(browser.find_element(By.ID, "profile-choice")).first_selected_option.text == "edge"
    finally:
        if download is not None:
            stop_process(download)
        proxy.stop()


def test_a_steady_download_graphs_the_links_rate_through_its_losses(tmp):
    """A download through a fixed 1 Mbit/s link whose queue fills and drops: the client's TCP
    passes bytes on in order, so what came after each loss waits for its repair (half a second
    behind the full queue), and the graph once drew 0 beside twice the rate. The history is what
    the link carried: every half second of the download at the link's rate."""
    profile = write_profile(tmp, "onemb", """
name: onemb
down:
  latency: 20ms
  bandwidth: 1Mbit
up:
  latency: 20ms
  bandwidth: 1Mbit
""")
    proxy = Proxy(profile)
    try:
        r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-x", proxy.url, "http://origin.netcond.test/bytes/1MB"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        history = requests.get(proxy.control_url + "/history", timeout=10).json()
        busy = [s for s in history["samples"] if s["down_kbps"] > 100]
        inner = busy[1:-1]  # the first and the last half second were partly idle
        assert len(inner) >= 10, busy
        # The case in question: segments lost to the full queue, and repaired, during the download.
        assert any(s["lost_per_s"] > 0 for s in inner) and any(s["retransmitted_per_s"] > 0 for s in inner), inner
        rates = [s["down_kbps"] for s in inner]
        assert all(600 <= rate <= 1300 for rate in rates), rates
    finally:
        proxy.stop()


def test_the_marks_labels_never_overlap(browser):
    """Changes a moment apart (outages, stalls, profile switches): each mark's label takes a row
    where it covers no other, or is left out, its line's title still saying what it was."""
    proxy = Proxy("3g")
    try:
        for change in (("outage", "blackhole"), ("outage", "end"), ("stall", "down"), ("stall", "end"),
                       ("profile", "edge"), ("profile", "3g"), ("outage", "refuse"), ("outage", "end")):
            assert proxy.ctl(*change).returncode == 0, change
            time.sleep(0.6)
        browser.get(proxy.control_url + "/")
        marks = "#plot-throughput line[data-kind]"
        assert wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, marks)) >= 8, seconds=10)
        boxes = browser.execute_script("""
            return [].map.call(document.querySelectorAll('#plot-throughput text.mark-label'), function(t){
                var b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height, t.textContent];});""")
        assert boxes
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
        assert all(0 <= box[0] and box[2] <= 400 for box in boxes), boxes
        rows = {round(box[1]) for box in boxes}
        assert len(rows) > 1, "labels a moment apart take more than one row"
        titles = browser.execute_script(
            "return [].map.call(document.querySelectorAll(arguments[0] + ' title'),"
            " function(t){return t.textContent;});", marks)
        assert len(titles) >= 8 and all(" s " in t for t in titles), titles
    finally:
        proxy.stop()


def test_the_dashboard_lists_each_destination_and_changes_one(browser, tmp):
    profile = write_profile(tmp, "routed", "extends: lte\nroutes:\n  - match: {host: cdn.netcond.test}\n"
                                           "    link: {latency: 120ms, bandwidth: 2Mbit}\n")
    proxy = Proxy(profile)
    try:
        browser.get(proxy.control_url + "/")
        row = '#routes tr[data-route="cdn.netcond.test"]'
        assert wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, row), seconds=10)
        cells = browser.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0] + ' td')).map(c => c.textContent)", row)
        assert cells[:4] == ["cdn.netcond.test", "host cdn.netcond.test", "2000 kbit/s, 120 ms", "2000 kbit/s, 120 ms"], cells
        # A download from the CDN: its row counts the connection and what the route carried down.
        subprocess.run(["curl", "-fsS", "-o", "/dev/null", "-x", proxy.url, "http://cdn.netcond.test/bytes/100KB"],
                       check=True, timeout=60)
        carried = lambda: browser.execute_script(  # noqa: E731
            "return Array.from(document.querySelectorAll(arguments[0] + ' td')).map(c => c.textContent)", row)[5:7]
        assert wait_until(lambda: carried()[0] == "1" and carried()[1].endswith(" KB")
                          and int(carried()[1].split()[0]) >= 100, seconds=10), carried()
        browser.find_element(By.CSS_SELECTOR, row + " .route-refuse").click()
        routes = lambda: json.loads(proxy.ctl("routes", "--json").stdout)["routes"]  # noqa: E731
        assert wait_until(lambda: routes()[0]["outage"] == "refuse", seconds=10)
        assert wait_until(lambda: "outage (refuse)" in browser.execute_script(
            "return document.querySelector(arguments[0]).textContent", row), seconds=10)
        browser.find_element(By.CSS_SELECTOR, row + " .route-end").click()
        assert wait_until(lambda: routes()[0]["outage"] is None, seconds=10)
    finally:
        proxy.stop()
