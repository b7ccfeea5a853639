"""Set-up rules from a profile file: a firewall that allows only some ports, names that do not
resolve, and a desktop firewall holding the first connection. Real curl sees each."""
import os
import subprocess

from conftest import NETCOND, run, write_profile


def test_firewall_refuses_ports_it_does_not_allow(tmp):
    profile = write_profile(tmp, "fw", "extends: lte\nfirewall: {allow_ports: [443]}\n")
    result = run(["run", profile, "--", "curl", "-sS", "-w", "%{http_code}", "http://origin.netcond.test/bytes/1KB"])
    assert result.returncode == 56 and result.stdout == "000"  # refused: the connection is reset
    events = run(["run", profile, "--", "sh", "-c", 'curl -s http://origin.netcond.test/ >/dev/null; netcond ctl events'],
                 env={"PATH": os.path.dirname(os.path.abspath(NETCOND)) + ":" + os.environ["PATH"]})
    assert "netcond firewall: port 80 is not allowed" in events.stdout, events.stdout + events.stderr
    # HTTPS (a CONNECT tunnel to port 443) is allowed: the origin's own HTTPS, trusted through CURL_CA_BUNDLE.
    tunnel = run(["run", profile, "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                  "https://origin.netcond.test/bytes/1KB"])
    assert tunnel.returncode == 0 and tunnel.stdout == "200"


def test_names_in_dns_fail_do_not_resolve(tmp):
    profile = write_profile(tmp, "nodns", "extends: none\ndns_fail: ['*.netcond.test']\n")
    http = run(["run", profile, "--", "curl", "-sS", "http://origin.netcond.test/bytes/1KB"])
    assert "cannot resolve host 'origin.netcond.test' (netcond dns_fail)" in http.stdout
    socks = run(["run", profile, "--", "sh", "-c", 'curl -sS -x "socks5h://${http_proxy#http://}" http://origin.netcond.test/'])
    assert socks.returncode == 97 and "(4)" in socks.stderr  # SOCKS5 reply 4: host unreachable


def test_connect_hold_delays_only_the_first_connection(tmp):
    profile = write_profile(tmp, "hold", "extends: none\nconnect_hold: 1500ms\n")
    script = (
        "curl -s -o /dev/null -w '%{time_total}\\n' http://origin.netcond.test/bytes/1KB; "
        "curl -s -o /dev/null -w '%{time_total}\\n' http://origin.netcond.test/bytes/1KB"
    )
    result = run(["run", profile, "--", "sh", "-c", script])
    first, second = (float(x) for x in result.stdout.split())
    assert first >= 1.5
    assert second < first
