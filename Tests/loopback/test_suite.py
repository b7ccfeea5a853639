"""`netcond test`: many scenarios, one client command line, JUnit and JSON reports, filters, and
bad files stopping the run before anything starts."""
import glob
import json
import os
import signal
import subprocess
import textwrap
import time
import xml.etree.ElementTree as ET

from conftest import NETCOND, run, wait_until

CURL = 'curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'
WGET = 'wget -q -O "$NETCOND_OUTPUT" "$NETCOND_URL"'

SMALL = """
    name: small-download
    description: a plain 100 KB download
    profile: lte
    origin: {files: {a.bin: {size: 100KB, seed: 5}}}
    client: {url: /files/a.bin, output: a.bin, deadline: 30s}
    checks: {completes: {}}
"""

CUT = """
    name: small-cut
    description: a 200 KB download cut at 50 KB
    profile: lte
    origin:
      files: {b.bin: {size: 200KB, seed: 6}}
      faults: [{file: b.bin, cut_after: 50KB, first: 1}]
    client: {url: /files/b.bin, output: b.bin, deadline: 30s}
    checks:
      completes: {}
      resumes: {}
"""


def suite(tmp_path, **files):
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.yaml").write_text(textwrap.dedent(text))
    return folder


def test_one_client_through_a_folder_with_reports(tmp_path):
    folder = suite(tmp_path, small=SMALL, cut=CUT, profile="name: slow\ndown: {bandwidth: 1Mbit}\n")
    junit, report = tmp_path / "report.xml", tmp_path / "report.json"
    env = {"TMPDIR": str(tmp_path)}
    r = run(["test", str(folder), "--seed", "9", "--junit", str(junit), "--json", str(report), "--", "sh", "-c", CURL],
            timeout=120, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    # The scenarios run in file order; the profile kept alongside them is not one.
    assert r.stdout.index("small-cut") < r.stdout.index("small-download")
    assert "2 scenarios: 1 passed, 1 failed (small-cut)" in r.stdout
    # A failure shows the end of the client's output and how to repeat the run.
    assert "│ curl: (18)" in r.stdout
    assert f"repeat with: netcond run {folder}/cut.yaml --seed 9 -- sh -c" in r.stdout

    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert set(cases) == {"small-download", "small-cut"}
    failure = cases["small-cut"].find("failure")
    assert failure is not None and failure.get("message").startswith("completes: exit 18")
    assert "never asked again" in failure.text
    assert "curl: (18)" in cases["small-cut"].find("system-err").text
    assert cases["small-download"].find("failure") is None

    data = json.loads(report.read_text())
    verdicts = {s["name"]: s["verdict"] for s in data["scenarios"]}
    assert verdicts == {"small-download": "passed", "small-cut": "failed"}
    cut = next(s for s in data["scenarios"] if s["name"] == "small-cut")
    assert cut["requests"][0]["path"] == "/files/b.bin" and cut["requests"][0]["completed"] is False
    assert cut["seed"] == 9
    # Working directories and captured output are gone.
    assert not glob.glob(str(tmp_path / "netcond-*"))

    good = run(["test", str(folder), "--", "sh", "-c", WGET.replace("-q", "-q -c")], timeout=120, env=env)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "2 scenarios: 2 passed" in good.stdout


def test_filter_and_list(tmp_path):
    folder = suite(tmp_path, small=SMALL, cut=CUT)
    listed = run(["test", str(folder), "--list"])
    assert listed.returncode == 0, listed.stderr
    assert [l.split("\t")[0] for l in listed.stdout.splitlines()] == ["small-cut", "small-download"]
    only = run(["test", str(folder), "--filter", "*download", "--", "sh", "-c", CURL], timeout=60)
    assert only.returncode == 0, only.stdout + only.stderr
    assert "1 scenario: 1 passed" in only.stdout and "small-cut" not in only.stdout
    none = run(["test", str(folder), "--filter", "nothing-like-this", "--", "true"])
    assert none.returncode == 2
    assert "no scenario matches --filter nothing-like-this; the names are: small-cut, small-download" in none.stderr


def test_a_bad_file_stops_the_run_before_anything_starts(tmp_path):
    folder = suite(tmp_path, small=SMALL, broken="profile: lte\nclient: {url: /x}\nchecks:\n  resume: {}\n")
    junit = tmp_path / "report.xml"
    r = run(["test", str(folder), "--junit", str(junit), "--", "sh", "-c", CURL])
    assert r.returncode == 2
    assert f"{folder}/broken.yaml:4:3: checks.resume: unknown key 'resume'; did you mean 'resumes'" in r.stderr
    assert "nothing was run" in r.stderr
    assert not junit.exists() and "small-download" not in r.stdout
    missing = run(["test", str(tmp_path / "nowhere")])
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
    nodir = run(["test", str(folder), "--junit", str(tmp_path / "no" / "r.xml"), "--", "true"])
    assert nodir.returncode == 2 and "does not exist" in nodir.stderr
    # A client that cannot start is said once, before any scenario runs (as a shell would: 127).
    noclient = run(["test", str(folder), "--", "no-such-client-netcond"])
    assert noclient.returncode == 127 and "command not found: no-such-client-netcond" in noclient.stderr
    assert "small-download" not in noclient.stdout


def test_a_client_that_cannot_start_still_gets_its_reports(tmp_path):
    """CI looks for the report: a client after `--` that cannot start gives an <error> (and a JSON
    error) for every scenario, and the shell's exit code (127 not found, 126 not executable)."""
    folder = suite(tmp_path, small=SMALL, cut=CUT)
    junit, report = tmp_path / "report.xml", tmp_path / "report.json"
    r = run(["test", str(folder), "--junit", str(junit), "--json", str(report), "--", "no-such-client-netcond"])
    assert r.returncode == 127, r.stdout + r.stderr
    assert "command not found: no-such-client-netcond" in r.stderr
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "0", "2")
    for case in root.iter("testcase"):
        error = case.find("error")
        assert error is not None, case.get("name")
        assert error.get("message") == "the client could not start: command not found: no-such-client-netcond"
    data = json.loads(report.read_text())
    assert data["passed"] is False
    assert {s["name"]: (s["verdict"], s["error"]) for s in data["scenarios"]} == {
        "small-cut": ("error", "the client could not start: command not found: no-such-client-netcond"),
        "small-download": ("error", "the client could not start: command not found: no-such-client-netcond"),
    }
    script = tmp_path / "client.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    junit.unlink()
    denied = run(["test", str(folder), "--filter", "small-cut", "--junit", str(junit), "--", str(script)])
    assert denied.returncode == 126, denied.stdout + denied.stderr
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert [case.get("name") for case in cases] == ["small-cut"]
    assert cases[0].find("error").get("message").startswith(f"the client could not start: cannot execute {script}")


def test_interrupt_stops_the_client_and_the_run(tmp_path):
    hang = """
        name: hangs
        profile: lte
        origin:
          files: {h.bin: {size: 1KB}}
          faults: [{file: h.bin, hang: true}]
        client: {url: /files/h.bin, output: h.bin, deadline: 60s}
        checks: {completes: {}}
    """
    folder = suite(tmp_path, hangs=hang, small=SMALL)
    marker = f"netcond-suite-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("NETCOND_SEED", None)
    process = subprocess.Popen(
        [NETCOND, "test", str(folder), "--junit", str(tmp_path / "r.xml"), "--",
         "sh", "-c", f'curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL?{marker}"; echo after'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    def pids(pattern):
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        return [int(pid) for pid in found]

    clients = []
    try:
        # The client must really be running, else the checks below would prove nothing.
        assert wait_until(lambda: pids(f"^curl .*{marker}"), seconds=20), "the client never started"
        clients = pids(f"^curl .*{marker}") + pids(f"^sh -c .*{marker}")
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in clients:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert process.returncode == 130, out + err
    assert "interrupted by signal 2" in out
    assert "[2/2]" not in out and "1 not run (interrupted by signal 2)" in out
    # The shell and its curl are both gone.
    assert not pids(f"^curl .*{marker}") and not pids(f"^sh -c .*{marker}")
    assert (tmp_path / "r.xml").exists()
    assert not glob.glob(str(tmp_path / "netcond-*"))


def test_shards_run_every_scenario_once_and_merge_into_the_whole_runs_verdicts(tmp_path):
    """The shipped scenarios in three parts, as three CI machines would run them: each scenario in
    exactly one part, every part's JUnit and JSON, and the merged JSON equal to one run of all."""
    scenarios = os.path.join(os.path.dirname(__file__), "..", "..", "Scenarios")
    # A client whose verdicts do not depend on timing: it asks for nothing.
    client = ["--", "true"]
    whole = tmp_path / "whole.json"
    r = run(["test", scenarios, "--seed", "4", "--json", str(whole), *client], timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    parts = []
    for index in (1, 2, 3):
        report, junit = tmp_path / f"part-{index}.json", tmp_path / f"part-{index}.xml"
        p = run(["test", scenarios, "--shard", f"{index}/3", "--seed", "4", "--json", str(report),
                 "--junit", str(junit), *client], timeout=600)
        assert p.returncode == 1, p.stdout + p.stderr
        assert f"part {index}/3 holds" in p.stderr
        suite_element = ET.parse(junit).getroot().find("testsuite")
        assert suite_element.get("name") == f"netcond scenarios (part {index} of 3)"
        parts.append(report)
    names = [s["name"] for p in parts for s in json.loads(p.read_text())["scenarios"]]
    assert sorted(names) == sorted(s["name"] for s in json.loads(whole.read_text())["scenarios"])
    assert len(names) == len(set(names)) == len(glob.glob(os.path.join(scenarios, "*.yaml")))
    merged = tmp_path / "merged.json"
    m = run(["report", "merge", *map(str, parts), "--json", str(merged)])
    assert m.returncode == 0, m.stderr
    data = json.loads(merged.read_text())
    verdicts = {s["name"]: s["verdict"] for s in data["scenarios"]}
    assert verdicts == {s["name"]: s["verdict"] for s in json.loads(whole.read_text())["scenarios"]}
    assert data["merged"] == ["1/3", "2/3", "3/3"] and data["passed"] == json.loads(whole.read_text())["passed"]
    # The same part twice, and a file that is not a report, are refused naming the file.
    twice = run(["report", "merge", str(parts[0]), str(parts[0])])
    assert twice.returncode == 2 and "is in both" in twice.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("{\"scenarios\": ")
    bad = run(["report", "merge", str(junk)])
    assert bad.returncode == 2 and "junk.json: not JSON" in bad.stderr


def test_a_bad_shard_is_refused_with_the_allowed_form(tmp_path):
    folder = suite(tmp_path, small=SMALL)
    for text in ("0/3", "4/3", "a/b"):
        r = run(["test", str(folder), "--shard", text, "--", "true"])
        assert r.returncode == 2, r.stdout + r.stderr
        assert "allowed: I/N with whole numbers 1 ≤ I ≤ N" in r.stderr, r.stderr
    # More parts than scenarios: the empty parts pass with nothing run.
    empty = run(["test", str(folder), "--shard", "2/2", "--", "true"])
    assert empty.returncode == 0 and "part 2/2 holds 0 of 1 scenario" in empty.stderr, empty.stdout + empty.stderr


def test_a_failing_clients_output_is_replayed_with_its_control_characters_written_out(tmp_path):
    """A client's ESC, BEL and NUL reach the terminal (and the CI log) as text, never as themselves."""
    folder = suite(tmp_path, small=SMALL)
    client = r"printf 'ok\033]0;pwned\007 \033[2J done\000 end\n'; exit 3"
    r = run(["test", str(folder), "--seed", "9", "--", "sh", "-c", client], timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    replayed = [line for line in r.stdout.splitlines() if line.startswith("  │ ")]
    assert replayed == ["  │ ok\\u001B]0;pwned\\u0007 \\u001B[2J done\\u0000 end"], r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\x00" not in r.stdout
