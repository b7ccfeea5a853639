"""HTTP faults: real clients (curl, python requests, raw sockets) see the 503 with Retry-After, the
slow first byte, the truncated or reset body, the dropped response and the slow close, from a
profile file or added live with `netcond ctl fault`."""
import json
import socket
import subprocess
import time

from conftest import NETCOND, curl, origin_bytes, read_to_eof, run, status, write_profile


def test_503_with_retry_after_from_a_profile_file_and_a_client_that_honours_it(tmp):
    profile = write_profile(tmp, "flaky", (
        "extends: lte\n"
        "faults:\n"
        "  - {match: {path: /bytes/*}, status: 503, retry_after: 1s, first: 2}\n"
    ))
    first = run(["run", profile, "--", "curl", "-s", "-D", "-", "-o", "/dev/null", "http://origin.netcond.test/bytes/1KB"])
    assert first.returncode == 0
    assert first.stdout.startswith("HTTP/1.1 503") and "Retry-After: 1\n" in first.stdout
    script = (
        "import time, requests\n"
        "from requests.adapters import HTTPAdapter\n"
        "from urllib3.util.retry import Retry\n"
        "s = requests.Session()\n"
        "s.mount('http://', HTTPAdapter(max_retries=Retry(total=5, status_forcelist=[503], backoff_factor=0,"
        " respect_retry_after_header=True)))\n"
        "t = time.monotonic()\n"
        "r = s.get('http://origin.netcond.test/bytes/2KB', timeout=30)\n"
        "print(r.status_code, len(r.content), round(time.monotonic() - t, 2))\n"
    )
    result = run(["run", profile, "--", "python3", "-c", script])
    assert result.returncode == 0, result.stderr
    status, size, elapsed = result.stdout.split()
    assert status == "200" and size == "2048"
    assert float(elapsed) >= 2.0  # two 503s, each with Retry-After: 1


def test_body_faults_truncate_reset_drop_and_first_byte(proxy_factory):
    proxy = proxy_factory("lte")
    url = "http://origin.netcond.test/bytes/100KB?seed=5"

    assert proxy.ctl("fault", "add", "{truncate_after: 10KB, first: 1}").returncode == 0
    cut = curl(proxy, "-o", "-", url)
    assert cut.returncode == 18  # transfer closed with bytes remaining
    assert cut.stdout == origin_bytes(100 * 1024, seed=5)[:10 * 1024]

    assert proxy.ctl("fault", "add", "{reset_after: 20KB, first: 1}").returncode == 0
    reset = curl(proxy, "-o", "/dev/null", url)
    assert reset.returncode == 56 and b"reset" in reset.stderr.lower()

    assert proxy.ctl("fault", "add", "{match: {method: POST}, drop_response: true, first: 1}").returncode == 0
    dropped = curl(proxy, "-d", "order=1", "http://origin.netcond.test/bytes/1KB")
    assert dropped.returncode == 52  # empty reply from server

    assert proxy.ctl("fault", "add", "{first_byte: 1500ms, first: 1}").returncode == 0
    slow = curl(proxy, "-o", "/dev/null", "-w", "%{time_starttransfer}", url)
    assert slow.returncode == 0 and float(slow.stdout) >= 1.5

    # Every fault hit once; the next request passes untouched.
    clean = curl(proxy, url)
    assert clean.returncode == 0 and clean.stdout == origin_bytes(100 * 1024, seed=5)
    listing = json.loads(proxy.ctl("fault", "list", "--json").stdout)
    assert [f["applied"] for f in listing["faults"]] == [1, 1, 1, 1]
    events = json.loads(proxy.ctl("events", "--json").stdout)["events"]
    hits = [e for e in events if e["kind"] == "fault"]
    assert [e["fault"] for e in hits] == [1, 2, 3, 4]
    assert hits[2]["method"] == "POST" and hits[2]["host"] == "origin.netcond.test"


def test_slow_close_keeps_an_eof_reader_waiting(proxy_factory):
    proxy = proxy_factory("none")
    assert proxy.ctl("fault", "add", "{slow_close: 1500ms}").returncode == 0
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
        started = time.monotonic()
        s.sendall(b"GET http://origin.netcond.test/bytes/100 HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n")
        data = read_to_eof(s)
        waited = time.monotonic() - started
    assert data.startswith(b"HTTP/1.1 200") and b"connection: close" in data.lower()
    assert data.endswith(origin_bytes(100))
    assert waited >= 1.5


def test_a_status_fault_keeps_the_connection_usable(proxy_factory):
    proxy = proxy_factory("none")
    assert proxy.ctl("fault", "add", "{match: {path: /bytes/1KB}, status: 429, retry_after: 'Wed, 21 Oct 2026 07:28:00 GMT'}").returncode == 0
    both = curl(proxy, "-s", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n",
                "http://origin.netcond.test/bytes/1KB", "http://origin.netcond.test/bytes/2KB")
    assert both.stdout.decode().split("\n")[:2] == ["429 1", "200 0"]


def test_bad_faults_are_refused_with_a_reason(proxy_factory, tmp):
    proxy = proxy_factory("none")
    bad = proxy.ctl("fault", "add", "{status: 200}")
    assert bad.returncode == 2 and "allowed: 400…599" in bad.stderr
    unknown = proxy.ctl("fault", "add", "{explode: true}")
    assert unknown.returncode == 2 and "drop_response" in unknown.stderr
    missing = proxy.ctl("fault", "remove", "7")
    assert missing.returncode == 2 and "no fault 7" in missing.stderr
    assert status(proxy)["faults"] == 0
    # By name: every fault of that name goes; an unknown name is refused with the names in force.
    for fault in ("{name: flaky, status: 503}", "{name: flaky, status: 502}", "{name: slow api, first_byte: 1s}"):
        assert proxy.ctl("fault", "add", fault).returncode == 0
    unnamed = proxy.ctl("fault", "remove", "flakey")
    assert unnamed.returncode == 2 and "no fault named 'flakey'; names in force: flaky, slow api" in unnamed.stderr
    assert proxy.ctl("fault", "remove", "flaky").returncode == 0
    assert status(proxy)["faults"] == 1
    assert proxy.ctl("fault", "remove", "slow api").returncode == 0
    assert status(proxy)["faults"] == 0
    path = write_profile(tmp, "bad", "faults:\n  - {match: {url: /x}, status: 503}\n")
    result = run(["validate", path])
    assert result.returncode == 2 and f"{path}:2:" in result.stderr and "'url'" in result.stderr
