"""An IPv6-only network with NAT64 and DNS64 (`ipv6_only:`), in the packet engine: the cage has no
IPv4 (its sockets get ENETUNREACH), DNS gives every name an IPv6 address in 64:ff9b::/96 (and the
prefix away at ipv4only.arpa), and the engine translates what crosses the link to the IPv4 origin,
byte for byte. The shipped scenario passes a client that uses names and fails one that asks for
IPv4 or carries an IPv4 literal; the proxy refuses the profile, naming the packet engine.

Needs root (skipped, with the reason, without it); every server is on 127.0.0.0/8, and every
process a test starts is stopped by netcond at the end of its run.
"""
import errno
import hashlib
import ipaddress
import json
import os
import socket

import pytest

from conftest import origin_bytes, packet_engine_missing, run, write_profile

packet_only = pytest.mark.skipif(packet_engine_missing() is not None, reason=packet_engine_missing() or "")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLIENTS = os.path.join(ROOT, "Tests", "loopback", "clients")
SCENARIO = os.path.join(ROOT, "Scenarios", "ipv6-only-nat64.yaml")
# The origin's IPv4 address, read from the IPv6 address DNS64 gives for its name: an app's literal.
LITERAL = ('addr=$(python3 -c "import socket,ipaddress; a=socket.getaddrinfo(\'origin.netcond.test\',80,'
           'socket.AF_INET6)[0][4][0]; print(ipaddress.IPv6Address(a).packed[12:] and '
           'ipaddress.IPv4Address(ipaddress.IPv6Address(a).packed[12:]))"); '
           'curl -sS -o "$NETCOND_OUTPUT" "http://$addr/files/data.json"')


def machines_dns64(name):
    """What a DNS64 gives for `name` from this machine's own lookups (native IPv6, else synthesized)."""
    def addresses(family):
        try:
            return list(dict.fromkeys(info[4][0] for info in socket.getaddrinfo(name, 80, family, socket.SOCK_STREAM)))
        except socket.gaierror:
            return []
    native = [a for a in addresses(socket.AF_INET6) if not a.startswith("::ffff:")]
    if native:
        return native
    return [str(ipaddress.IPv6Address(bytes.fromhex("0064ff9b" + "00" * 8) + socket.inet_aton(a)))
            for a in addresses(socket.AF_INET)]


def scenario(client=None):
    command = ["run", SCENARIO, "--seed", "3"]
    if client is not None:
        command += ["--", "sh", "-c", client]
    return run(command, timeout=120)


def completes(result):
    return next(l for l in result.stdout.splitlines() if l[2:].startswith("completes —"))


@packet_only
def test_the_cage_has_no_ipv4_and_reaches_the_origin_by_name_through_nat64(tmp_path):
    profile = write_profile(tmp_path, "v6", "down: {latency: 40ms}\nup: {latency: 40ms}\nipv6_only: true\n")
    result = run(["run", "--engine", "packet", profile, "--", "python3",
                  os.path.join(CLIENTS, "nat64_probe.py")], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    # No IPv4 route: connect and send fail at once, an IPv4-mapped address too.
    assert seen["ipv4_loopback"] == errno.ENETUNREACH, seen
    assert seen["ipv4_mapped"] == errno.ENETUNREACH, seen
    assert seen["ipv4_udp"] == errno.ENETUNREACH, seen
    # DNS64: no A record, the AAAA in the prefix, the prefix at ipv4only.arpa.
    assert seen["a_only"] in (socket.EAI_NODATA, socket.EAI_NONAME), seen
    assert seen["aaaa"].startswith("64:ff9b::7f6e:"), seen
    assert all(a.startswith("64:ff9b::") for a in seen["origin"]), seen
    assert seen["prefix"] == ["64:ff9b::c000:aa", "64:ff9b::c000:ab"], seen
    # Another name, as this machine looks it up: its own IPv6 addresses, else its IPv4 ones in the prefix.
    assert seen["dns64_localhost"] == machines_dns64("localhost"), seen
    # The handshake crossed the link (80 ms round trip), and the peer is the synthesized address.
    assert 0.08 <= seen["connect_seconds"] < 0.08 * 10, seen
    assert seen["peer"].startswith("64:ff9b::"), seen
    # 300 KB through the translation, byte for byte.
    body = origin_bytes(300 * 1024)
    assert seen["download"] == [len(body), hashlib.sha256(body).hexdigest()], seen
    assert "untranslated" not in result.stderr


@packet_only
def test_a_client_using_names_passes_and_one_asking_for_ipv4_or_with_a_literal_fails():
    good = scenario()
    assert good.returncode == 0, good.stdout + good.stderr
    assert completes(good).startswith("✓") and "⚠" not in good.stdout, good.stdout
    ipv4_only = scenario('curl -4 -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert ipv4_only.returncode == 1, ipv4_only.stdout + ipv4_only.stderr
    assert "exit 6" in completes(ipv4_only), ipv4_only.stdout
    assert ("on this IPv6-only network it asked only for an IPv4 address (an A record, which DNS64 does not give): "
            "origin.netcond.test at +") in completes(ipv4_only), ipv4_only.stdout
    literal = scenario(LITERAL)
    assert literal.returncode == 1, literal.stdout + literal.stderr
    assert "exit 7" in completes(literal), literal.stdout
    assert ("on this IPv6-only network it connected to an IPv4 address (there is no IPv4 route): "
            "origin.netcond.test (127.110.") in completes(literal), literal.stdout
    # The client that passes asked for both families: its A question is no fault.
    assert "IPv6-only network it" not in completes(good), good.stdout


def test_the_proxy_refuses_an_ipv6_only_profile_naming_the_packet_engine(tmp_path):
    profile = write_profile(tmp_path, "v6", "ipv6_only: true\n")
    result = run(["run", "--engine", "proxy", profile, "--", "true"], timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "ipv6_only (NAT64 at 64:ff9b::/96)" in result.stderr and "--engine packet" in result.stderr
