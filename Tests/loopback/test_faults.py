"""HTTP faults: real clients (curl, python requests, raw sockets) see the 503 with Retry-After, the
delayed response, the body cut with a FIN or a reset, the dropped response, the hang and the slow
close, from a profile file, added live with `netcond ctl fault`, or done by the origin itself."""
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


def test_body_faults_cut_with_fin_or_reset_drop_and_delay(proxy_factory):
    proxy = proxy_factory("lte")
    url = "http://origin.netcond.test/bytes/100KB?seed=5"

    assert proxy.ctl("fault", "add", "{cut_after: 10KB, first: 1}").returncode == 0
    cut = curl(proxy, "-o", "-", url)
    assert cut.returncode == 18  # transfer closed with bytes remaining
    assert cut.stdout == origin_bytes(100 * 1024, seed=5)[:10 * 1024]

    assert proxy.ctl("fault", "add", "{cut_after: 20KB, end: reset, first: 1}").returncode == 0
    reset = curl(proxy, "-o", "/dev/null", url)
    assert reset.returncode == 56 and b"reset" in reset.stderr.lower()

    assert proxy.ctl("fault", "add", "{match: {method: POST}, drop_response: true, first: 1}").returncode == 0
    dropped = curl(proxy, "-d", "order=1", "http://origin.netcond.test/bytes/1KB")
    assert dropped.returncode == 52  # empty reply from server

    assert proxy.ctl("fault", "add", "{delay: 1500ms, first: 1}").returncode == 0
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
    for fault in ("{name: flaky, status: 503}", "{name: flaky, status: 502}", "{name: slow api, delay: 1s}"):
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


# What a client sees of each action, wherever the fault is written: the same text in a scenario's
# origin.faults (the origin does it) and in its profile's faults: (the proxy does it).
OBSERVE = r"""
import json, os, socket, subprocess, sys, time
url = os.environ["NETCOND_URL"]
t = time.monotonic()
if os.environ["HOW"] == "eof":
    host, port = os.environ["HTTP_PROXY"].split("//")[1].rstrip("/").rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=20)
    s.sendall(("GET " + url + " HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n").encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk: break
        data += chunk
    out = {"eof_after": time.monotonic() - t, "head": data.split(b"\r\n")[0].decode()}
else:
    args = ["curl", "-s", "-D", "-", "-o", os.environ["NETCOND_WORKDIR"] + "/body", "--max-time", "3", url]
    if os.environ["HOW"] == "post": args[1:1] = ["-d", "x=1"]
    r = subprocess.run(args, capture_output=True, text=True)
    size = os.path.getsize(os.environ["NETCOND_WORKDIR"] + "/body") if os.path.exists(os.environ["NETCOND_WORKDIR"] + "/body") else 0
    out = {"exit": r.returncode, "head": (r.stdout.splitlines() or [""])[0], "retry": "Retry-After: 2" in r.stdout, "bytes": size,
           "took": time.monotonic() - t}
open(os.environ["OUT"], "w").write(json.dumps(out))
"""


def observe_at_both_ends(tmp, fault, url, how):
    import pathlib
    tmp = pathlib.Path(tmp)
    seen = {}
    for end in ("origin", "proxy"):
        out = tmp / f"{end}.json"
        faults = f"[{fault}]"
        scenario = tmp / f"{end}.yaml"
        scenario.write_text(
            "profile: " + ("none" if end == "origin" else "{extends: none, faults: " + faults + "}") + "\n"
            "origin:\n  files: {big.bin: {size: 100KB, seed: 4}}\n  api: {orders: {method: POST}}\n"
            + (f"  faults: {faults}\n" if end == "origin" else "")
            + f"client:\n  command: [python3, -c, {json.dumps(OBSERVE)}]\n  url: {url}\n"
            f"  env: {{OUT: {out}, HOW: {how}}}\n  deadline: 30s\n"
            "checks: {completes: {}}\n")
        result = run(["run", str(scenario)], timeout=90)
        assert out.exists(), result.stdout + result.stderr
        seen[end] = json.loads(out.read_text())
    return seen["origin"], seen["proxy"]


def test_each_action_looks_the_same_done_by_the_origin_or_the_proxy(tmp):
    # A cut ending in a FIN: curl's short read (18) after exactly the bytes; with end: reset, 56.
    for fault, code in (("{file: big.bin, cut_after: 10KB}", 18), ("{file: big.bin, cut_after: 10KB, end: reset}", 56)):
        origin, proxy = observe_at_both_ends(tmp, fault, "/files/big.bin", "get")
        assert origin["exit"] == proxy["exit"] == code, (fault, origin, proxy)
        assert origin["bytes"] == proxy["bytes"] == 10 * 1024
    origin, proxy = observe_at_both_ends(tmp, "{file: big.bin, status: 503, retry_after: 2s}", "/files/big.bin", "get")
    assert origin["head"] == proxy["head"] == "HTTP/1.1 503 Service Unavailable" and origin["retry"] and proxy["retry"]
    origin, proxy = observe_at_both_ends(tmp, "{file: big.bin, hang: true}", "/files/big.bin", "get")
    assert origin["exit"] == proxy["exit"] == 28 and origin["bytes"] == proxy["bytes"] == 0  # curl's --max-time 3
    origin, proxy = observe_at_both_ends(tmp, "{file: big.bin, delay: 1500ms}", "/files/big.bin", "get")
    assert origin["exit"] == proxy["exit"] == 0 and origin["took"] >= 1.5 and proxy["took"] >= 1.5
    origin, proxy = observe_at_both_ends(tmp, "{api: orders, drop_response: true}", "/api/orders", "post")
    assert origin["exit"] == proxy["exit"] == 52  # an empty reply
    origin, proxy = observe_at_both_ends(tmp, "{file: big.bin, slow_close: 1500ms}", "/files/big.bin", "eof")
    assert origin["head"] == proxy["head"] == "HTTP/1.1 200 OK" and origin["eof_after"] >= 1.5 and proxy["eof_after"] >= 1.5


def test_the_old_spellings_still_read_and_validate_names_the_new_ones(tmp):
    path = write_profile(tmp, "old", "faults:\n  - {first_byte: 1s}\n  - {truncate_after: 1KB}\n  - {reset_after: 2KB}\n")
    result = run(["validate", path])
    assert result.returncode == 0, result.stderr
    notes = [line for line in (result.stdout + result.stderr).splitlines() if ": note: " in line]
    assert [n.split(":")[2] for n in notes] == ["2", "3", "4"], result.stdout + result.stderr
    assert "'first_byte' is the old spelling; it reads as delay:" in notes[0]
    assert "end: reset" in notes[2]
    # A run says it too, on stderr, and goes on.
    ran = run(["run", path, "--", "true"])
    assert ran.returncode == 0 and f"{path}:2:18: note: 'first_byte' is the old spelling" in ran.stderr, ran.stderr
