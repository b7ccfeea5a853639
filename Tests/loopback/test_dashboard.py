"""The live dashboard the control API serves at its root, in a real browser (headless chromium):
the throughput of a running download moves on it, a click on "blackhole" starts an outage that GET
/status reports, and no other page can frame it or change anything through it."""
import json
import subprocess
import time

import pytest
import requests

from conftest import Proxy, browser, screenshot, stop_process, wait_until  # noqa: F401  (browser: a fixture)

pytest.importorskip("selenium", reason="selenium is not installed (scripts/test installs it)")
from selenium.webdriver.common.by import By  # noqa: E402


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
        graph = browser.find_element(By.ID, "graph-down")
        points = len(graph.get_attribute("points").split())
        assert wait_until(lambda: len(graph.get_attribute("points").split()) > points, seconds=5)
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
