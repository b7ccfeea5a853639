"""The HTML report in a real browser (Debian's chromium, headless, driven by selenium): a failing and
a passing scenario's reports render, their timelines have the marks the evidence names (asserted
through the DOM), a check shows its marks when picked, and the client's output cannot run script."""
import json
import os

import pytest

from conftest import browser, run, screenshot  # noqa: F401  (browser: a fixture)

pytest.importorskip("selenium", reason="selenium is not installed (scripts/test installs it)")
from selenium.webdriver.common.by import By  # noqa: E402

SCENARIO = os.path.join(os.path.dirname(__file__), "..", "..", "Scenarios", "resume-after-dropout.yaml")
# Prints a line that would run script if it were not escaped, then downloads.
PRINTS = "echo \"<script>document.title='pwned'</script><img src=x onerror=\\\"document.title='pwned'\\\">\"; "


def report(tmp_path, name, client):
    html = tmp_path / f"{name}.html"
    r = run(["run", SCENARIO, "--seed", "3", "--quiet", "--html", str(html), "--", "sh", "-c", PRINTS + client],
            timeout=120)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert html.exists(), r.stderr
    return r.returncode, html


def marks(browser, selector):
    return browser.find_elements(By.CSS_SELECTOR, selector)


def test_a_failing_and_a_passing_report_render_with_their_marks(browser, tmp_path):
    code, failing = report(tmp_path, "fail", "curl -sS -o \"$NETCOND_OUTPUT\" \"$NETCOND_URL\"")
    assert code == 1
    browser.get(failing.as_uri())
    assert "pwned" not in browser.title and browser.title.startswith("netcond: 0 of 1 scenarios passed")
    assert browser.find_element(By.CSS_SELECTOR, "tr.row").get_attribute("data-verdict") == "failed"
    # curl asked once, and the origin cut that response: one request, drawn as cut short.
    requests = marks(browser, "svg.timeline g.mark.request")
    assert len(requests) == 1 and "broken" in requests[0].get_attribute("class")
    assert "cut short" in requests[0].find_element(By.TAG_NAME, "title").get_attribute("textContent")
    # The client's output line is on the timeline as text, never as markup.
    outputs = marks(browser, "svg.timeline g.mark.output")
    assert any("<script>" in o.find_element(By.TAG_NAME, "title").get_attribute("textContent") for o in outputs)
    assert not browser.find_elements(By.CSS_SELECTOR, "section img")
    failed = [a for a in browser.find_elements(By.CSS_SELECTOR, "li.check.failed a.check-link")]
    assert [a.text for a in failed] == ["✗ completes", "✗ resumes"]
    # Each request has its labelled row; the cut one is drawn broken.
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "svg.timeline text.request-label")]
    assert labels == ["GET /files/big.bin 200 · 600 KB · cut"], labels

    code, passing = report(tmp_path, "pass", "wget -q -O \"$NETCOND_OUTPUT\" \"$NETCOND_URL\"")
    assert code == 0
    browser.get(passing.as_uri())
    assert browser.title.startswith("netcond: 1 of 1 scenarios passed") and "pwned" not in browser.title
    requests = marks(browser, "svg.timeline g.mark.request")
    ranged = marks(browser, "svg.timeline g.mark.request.range")
    assert len(requests) == 2 and len(ranged) == 1
    assert "Range: bytes=614400-" in ranged[0].find_element(By.TAG_NAME, "title").get_attribute("textContent")
    assert marks(browser, "svg.timeline polyline.delivered")
    # Picking the resumes check shows its moments: the cut request and the one that resumed it.
    resumes = next(a for a in browser.find_elements(By.CSS_SELECTOR, "a.check-link") if a.text == "✓ resumes")
    def shown():  # a vertical line has no width, so Selenium's is_displayed cannot tell: its computed style
        return [m for m in marks(browser, "line.check-mark")
                if browser.execute_script("return getComputedStyle(arguments[0]).display", m) != "none"]
    assert not shown()
    resumes.click()
    shown = shown()
    assert shown and all(m.get_attribute("data-check") == "resumes" for m in shown)
    highlighted = marks(browser, "svg.timeline g.mark.request.highlight")
    assert len(highlighted) == 2, [h.get_attribute("outerHTML")[:200] for h in highlighted]


def test_the_json_report_draws_the_same_page_and_a_bad_one_is_refused(tmp_path):
    json_path, html_path = tmp_path / "r.json", tmp_path / "r.html"
    r = run(["run", SCENARIO, "--seed", "3", "--quiet", "--json", str(json_path), "--html", str(html_path), "--",
             "sh", "-c", "wget -q -O \"$NETCOND_OUTPUT\" \"$NETCOND_URL\""], timeout=120)
    assert r.returncode == 0, r.stderr
    # The resumed request reached the client whole, after the origin had sent it (the link held
    # the rest); the cut one has no such moment.
    cut, resumed = json.loads(json_path.read_text())["scenarios"][0]["requests"]
    assert "received" not in cut and resumed["received"] >= resumed["ended"], (cut, resumed)
    redrawn = tmp_path / "again.html"
    d = run(["report", str(json_path), "--html", str(redrawn)])
    assert d.returncode == 0, d.stderr
    assert redrawn.read_text() == html_path.read_text()
    # An option's value that is also a subcommand's name is the value (`merge`, a file to write).
    named = run(["report", "--html", "merge", str(json_path)], cwd=tmp_path)
    assert named.returncode == 0 and (tmp_path / "merge").read_text() == html_path.read_text(), named.stderr
    truncated = tmp_path / "truncated.json"
    truncated.write_text(json_path.read_text()[:200])
    bad = run(["report", str(truncated), "--html", str(tmp_path / "x.html")])
    assert bad.returncode == 2 and "truncated.json: not JSON (it may be truncated)" in bad.stderr
    old = tmp_path / "old.json"
    old.write_text(json_path.read_text().replace('"format" : 2', '"format" : 1'))
    bad = run(["report", str(old), "--html", str(tmp_path / "x.html")])
    assert bad.returncode == 2 and "a report of format 1; this netcond draws format 2" in bad.stderr, bad.stderr
    assert not (tmp_path / "x.html").exists()


def test_the_readme_picture_is_a_clean_run_of_a_shipped_scenario(browser, tmp_path):
    """The README's picture: the shipped scenario run from the project's folder with a plain curl
    (no test payload, no path of this machine), the resumes check picked."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    html = tmp_path / "clean.html"
    r = run(["run", "Scenarios/resume-after-dropout.yaml", "--seed", "3", "--quiet", "--html", str(html), "--",
             "sh", "-c", 'curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'], timeout=120, cwd=root)
    assert r.returncode == 1, r.stdout + r.stderr
    page = html.read_text()
    assert "<script>document" not in page and "pwned" not in page
    assert "/tmp/" not in page and os.path.abspath(root) not in page, "no path of this machine"
    browser.get(html.as_uri())
    resumes = next(a for a in browser.find_elements(By.CSS_SELECTOR, "a.check-link") if a.text == "✗ resumes")
    resumes.click()
    screenshot(browser, "report-failed")


def test_dragging_across_a_timeline_zooms_into_that_stretch(browser, tmp_path):
    """A reader drags across the timeline of a run of several seconds: the axis then spans what was
    dragged over (finer ticks), the bars move to match, and a double-click shows the whole run."""
    code, page = report(tmp_path, "zoom", "wget -q -O \"$NETCOND_OUTPUT\" \"$NETCOND_URL\"")
    assert code == 0
    browser.get(page.as_uri())
    svg = browser.find_element(By.CSS_SELECTOR, "svg.timeline")
    end = float(svg.get_attribute("data-end"))
    def state():
        return browser.execute_script("""
            var svg = document.querySelector('svg.timeline');
            return {zoom: svg.getAttribute('data-zoom'),
                    ticks: [].map.call(svg.querySelectorAll('g.axis-ticks text'), function(t){return t.textContent;}),
                    bars: [].map.call(svg.querySelectorAll('g.mark.request rect:not(.wait)'), function(r){return +r.getAttribute('x');})};""")
    before = state()
    assert before["zoom"] is None and before["ticks"][0] == "0s"
    # The 0s label is centred on the plot's left edge: the axis's clip leaves it whole (it read `s`).
    drawn = browser.execute_script("""
        var label = document.querySelector('svg.timeline g.axis-ticks text'), box = label.getBBox();
        var clip = document.querySelector(label.parentNode.getAttribute('clip-path').slice(4, -1) + ' rect');
        return [box.x, box.x + box.width, +clip.getAttribute('x'), +clip.getAttribute('x') + +clip.getAttribute('width')];""")
    assert drawn[2] <= drawn[0] and drawn[1] <= drawn[3] and drawn[0] < 250 < drawn[1], drawn
    # Drag from a fifth to three fifths of the plot area (the view box is 1,100 wide: 250 to 1,090).
    width = svg.size["width"]
    def offset(view_x):  # from the element's centre, in screen pixels
        return int((view_x - 550) * width / 1100)
    from selenium.webdriver.common.action_chains import ActionChains
    ActionChains(browser).move_to_element_with_offset(svg, offset(250 + 840 * 0.2), 0).click_and_hold() \
        .move_by_offset(offset(250 + 840 * 0.6) - offset(250 + 840 * 0.2), 0).release().perform()
    after = state()
    assert after["zoom"] is not None, after
    a, b = (float(v) for v in after["zoom"].split())
    assert abs(a - end * 0.2) < end * 0.03 and abs(b - end * 0.6) < end * 0.03, (a, b, end)
    assert len(after["ticks"]) >= 3 and after["ticks"] != before["ticks"], after["ticks"]
    # A bar's new place is its time on the zoomed axis.
    for old, new in zip(before["bars"], after["bars"]):
        t = (old - 250) / 840 * end
        assert abs(new - (250 + (t - a) / (b - a) * 840)) < 1.5, (old, new, t)
    ActionChains(browser).double_click(svg).perform()
    again = state()
    assert again["zoom"] is None and again["bars"] == before["bars"] and again["ticks"] == before["ticks"]
