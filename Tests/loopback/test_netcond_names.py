"""Every name under .netcond.test reaches the built-in origin in both engines, over HTTP and HTTPS
(the run's CA signs a certificate for *.netcond.test), and the origin's log, the JSON report and
the HTML report name the host each request asked for. Under the packet engine each name resolves,
through the run's own DNS responder, to an address of its own; a name outside netcond.test is
refused there and goes to the machine's nameservers, as before.

The packet-engine tests need root (skipped, with the reason, without it); every server is on
127.0.0.0/8, and every process a test starts is stopped.
"""
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import threading

import pytest

from conftest import NETCOND, packet_engine_missing, run, write_profile

packet_only = pytest.mark.skipif(packet_engine_missing() is not None, reason=packet_engine_missing() or "")

# Two names, HTTP and HTTPS (curl trusts the run's CA through CURL_CA_BUNDLE), a name that does not
# exist; each line says how it went.
COMMAND = r"""
curl -sS -o /dev/null -w "cdn %{http_code} %{remote_ip}\n" http://cdn.netcond.test/bytes/1KB
curl -sS -o /dev/null -w "api %{http_code} %{remote_ip}\n" http://API.netcond.test/bytes/2KB
curl -sS -o /dev/null -w "tls %{http_code}\n" https://cdn.netcond.test/bytes/3KB
curl -sS -o /dev/null http://gone.invalid/ 2>/dev/null; echo "invalid $?"
"""


def lines_of(out):
    return {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}


@packet_only
def test_packet_engine_names_under_netcond_test_resolve_each_to_an_address_of_its_own():
    script = COMMAND + r"""
getent hosts cdn.netcond.test api.netcond.test | awk '{print "getent", $2, $1}'
getent hosts cdn.netcond.test | awk '{print "again", $2, $1}'
grep ' /etc/resolv.conf ' /proc/self/mountinfo | awk '{print "resolv", $4}'
sed -n 's/^nameserver /first /p' /etc/resolv.conf | head -n 1
"""
    result = run(["run", "--engine", "packet", "--quiet", "none", "--", "sh", "-c", script], timeout=120)
    assert result.returncode == 0, result.stderr
    got = lines_of(result.stdout)
    assert got["cdn"][0] == "200" and got["api"][0] == "200" and got["tls"] == ["200"], result.stdout
    assert got["invalid"] == ["6"], result.stdout
    # Two names, two addresses, both the origin's (127.110.0.0/16), each the same every time.
    cdn, api = got["cdn"][1], got["api"][1]
    assert cdn != api and cdn.startswith("127.110.") and api.startswith("127.110."), result.stdout
    addresses = dict(re.findall(r"^getent (\S+) (\S+)$", result.stdout, re.M))
    assert addresses == {"cdn.netcond.test": cdn, "api.netcond.test": api}, result.stdout
    assert got["again"] == ["cdn.netcond.test", cdn]
    # The responder is the command's first nameserver (the origin's address); its resolv.conf is
    # gone once the run ended.
    assert got["first"][0].startswith("127.110."), result.stdout
    resolv = got["resolv"][0]
    assert "resolv" in resolv and not os.path.exists(resolv), resolv


@packet_only
def test_packet_engine_a_dns_fail_name_under_netcond_test_is_answered_no_such_name_by_the_engine(tmp_path):
    """The engine answers a dns_fail name's query on the link, so the responder never gives it an
    address; the other names still resolve."""
    profile = write_profile(str(tmp_path), "fails", "name: fails\nlink:\n  latency: 5ms\ndns_fail: [cdn.netcond.test]\n")
    script = ('getent hosts cdn.netcond.test; echo "cdn $?"; '
              'curl -sS -o /dev/null -w "api %{http_code}\\n" http://api.netcond.test/bytes/10')
    result = run(["run", "--engine", "packet", profile, "--", "sh", "-c", script], timeout=120)
    assert result.returncode == 0, result.stderr
    assert "cdn 2" in result.stdout and "api 200" in result.stdout, result.stdout
    assert "answered no such name (dns_fail)" in result.stderr, result.stderr


class _Nameserver:
    """A DNS server on 127.77.X.Y:53 answering A queries for `elsewhere.example` with 127.77.0.9 and
    the rest NXDOMAIN; it counts the queries it got."""

    def __init__(self):
        self.host = f"127.77.{random.randint(1, 254)}.{random.randint(1, 254)}"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((self.host, 53))
        self.sock.settimeout(0.2)
        self.queries = []
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping:
            try:
                query, peer = self.sock.recvfrom(512)
            except socket.timeout:
                continue
            except OSError:
                return
            labels, at = [], 12
            while at < len(query) and query[at]:
                labels.append(query[at + 1:at + 1 + query[at]].decode(errors="replace"))
                at += 1 + query[at]
            name, qtype = ".".join(labels).lower(), struct.unpack(">H", query[at + 1:at + 3])[0]
            self.queries.append(name)
            found = name == "elsewhere.example"
            answer = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + bytes([127, 77, 0, 9]) if found and qtype == 1 else b""
            head = query[:2] + bytes([0x81, 0x80 if found else 0x83]) + struct.pack(">HHHH", 1, 1 if answer else 0, 0, 0)
            self.sock.sendto(head + query[12:at + 5] + answer, peer)

    def stop(self):
        self.stopping = True
        self.thread.join(5)
        self.sock.close()


@packet_only
def test_packet_engine_a_name_outside_netcond_test_goes_on_to_the_machines_nameserver(tmp_path):
    """glibc asks the run's responder first; refused, it asks the next nameserver: the machine's
    (here a resolv.conf of this test's, bind-mounted in a mount namespace of netcond's own, naming a
    server of this test's). A name under netcond.test never reaches the machine's server."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare (util-linux)")
    server = _Nameserver()
    try:
        conf = tmp_path / "resolv.conf"
        conf.write_text(f"search corp.example\nnameserver {server.host}\noptions timeout:2\n")
        script = ("getent hosts elsewhere.example; echo \"elsewhere $?\"; getent hosts cdn.netcond.test; "
                  "grep -v '^#' /etc/resolv.conf")
        result = subprocess.run(
            ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(conf),
             NETCOND, "run", "--engine", "packet", "--quiet", "none", "--", "sh", "-c", script],
            capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert "127.77.0.9      elsewhere.example" in result.stdout and "elsewhere 0" in result.stdout, result.stdout
    assert re.search(r"^127\.110\.\S+\s+cdn\.netcond\.test$", result.stdout, re.M), result.stdout
    # The responder first, then the machine's lines as they were.
    kept = [line for line in result.stdout.splitlines() if line.startswith(("nameserver", "search", "options"))]
    assert kept[0].startswith("nameserver 127.110.") and kept[1:] == [
        "search corp.example", f"nameserver {server.host}", "options timeout:2"], result.stdout
    assert "elsewhere.example" in server.queries
    assert not any(name.endswith("netcond.test") for name in server.queries), server.queries


def test_proxy_engine_names_under_netcond_test_reach_the_origin_over_http_and_https():
    result = run(["run", "--quiet", "none", "--", "sh", "-c", COMMAND], timeout=120)
    assert result.returncode == 0, result.stderr
    got = lines_of(result.stdout)
    assert got["cdn"][0] == "200" and got["api"][0] == "200" and got["tls"] == ["200"], result.stdout
    # Through the proxy a name that does not exist is the proxy's 502 (curl itself succeeds).
    assert got["invalid"] == ["0"], result.stdout


SCENARIO = """
name: two-hosts
description: "Two names under netcond.test, both the built-in origin: the reports name each request's host."
profile: none
client:
  deadline: 30s
checks:
  completes: {}
"""


@pytest.mark.parametrize("engine", ["packet", "proxy"])
def test_the_reports_name_the_host_each_request_asked_for(tmp_path, engine):
    if engine == "packet" and packet_engine_missing():
        pytest.skip(packet_engine_missing())
    scenario = tmp_path / "two-hosts.yaml"
    scenario.write_text(SCENARIO)
    report, page = tmp_path / "run.json", tmp_path / "run.html"
    client = ("curl -sS -o /dev/null http://cdn.netcond.test/bytes/1KB && "
              "curl -sS -o /dev/null https://api.netcond.test/bytes/2KB")
    result = run(["run", "--engine", engine, str(scenario), "--seed", "3", "--json", str(report),
                  "--html", str(page), "--", "sh", "-c", client], timeout=150)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every connection crossed the link (the packet engine knows each name's address as the origin's).
    assert "⚠ not exact" not in result.stdout, result.stdout
    requests = json.loads(report.read_text())["scenarios"][0]["requests"]
    assert [(r.get("host"), r["path"]) for r in requests] == [
        ("cdn.netcond.test", "/bytes/1KB"), ("api.netcond.test", "/bytes/2KB")], requests
    html = page.read_text()
    assert ">cdn.netcond.test GET /bytes/1KB 200" in html and ">api.netcond.test GET /bytes/2KB 200" in html
