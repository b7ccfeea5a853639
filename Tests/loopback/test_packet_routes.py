"""`netcond run --engine packet` with a profile's `routes:`: a connection to a routed destination
crosses the access link and the route's link in series; any other, the access link alone.

Every destination is on 127.0.0.1. Needs root (or CAP_NET_ADMIN), nft and iptables: skipped, with
the reason, without them. Each test stops every server it starts, and checks that netcond leaves
nothing of its run behind.
"""
import os
import socket

import pytest

from conftest import packet_engine_missing, wait_until, write_profile
from packet_state import leftovers
from test_packet_engine import packet_run, tcp_echo

pytestmark = pytest.mark.skipif(packet_engine_missing() is not None, reason=packet_engine_missing() or "")


@pytest.fixture(autouse=True)
def clean_host():
    """What gone runs left after the test, and was not there before it, is a leak of this test's."""
    before = set(leftovers())
    yield
    assert wait_until(lambda: not set(leftovers()) - before, seconds=5), sorted(set(leftovers()) - before)


# For each port given: the time from connect() to the echo of one byte read back, in seconds.
CLIENT = r"""
import socket, sys, time
for port in sys.argv[1:]:
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", int(port)), timeout=20) as s:
        s.sendall(b"x")
        assert s.recv(1) == b"x"
    print(port, round(time.monotonic() - start, 4), flush=True)
"""


def test_a_routed_destination_meets_the_access_link_and_its_routes_link_in_series(tmp):
    """Access latency 20 ms each way; a route for 127.0.0.1 on one port adds 150 ms each way. The
    connect and one echo are two round trips: at least 2×(20+150) ms on the routed port, at least
    2×20 ms (and well under the routed) on the other."""
    with tcp_echo() as routed, tcp_echo() as plain:
        profile = write_profile(tmp, "routed", f"""
name: routed
link: {{latency: 20ms}}
routes:
  - name: far-service
    match: {{address: 127.0.0.1/32, port: {routed}}}
    link: {{latency: 150ms}}
""")
        client = os.path.join(tmp, "client.py")
        with open(client, "w") as f:
            f.write(CLIENT)
        result = packet_run(profile, ["python3", client, str(routed), str(plain)])
        assert result.returncode == 0, result.stdout + result.stderr
        times = {int(port): float(seconds) for port, seconds in (line.split() for line in result.stdout.splitlines())}
        assert 0.68 <= times[routed] < 3.0, times
        assert 0.08 <= times[plain] < 0.5, times
        assert times[plain] < times[routed] - 0.4, times


def test_a_routes_dns_fail_holds_for_a_name_the_hosts_file_would_give(tmp):
    """The origin's name is in the command's hosts file; a route that makes its look-up fail takes
    it out, so the look-up goes to DNS and the engine answers "no such name", as the profile's own
    dns_fail does. Another name under netcond.test still resolves."""
    profile = write_profile(tmp, "failing", """
name: failing
routes:
  - match: {host: origin.netcond.test}
    dns_fail: [origin.netcond.test]
""")
    script = ("getent hosts origin.netcond.test; echo \"origin rc $?\"; "
              "getent hosts api.netcond.test >/dev/null; echo \"api rc $?\"")
    result = packet_run(profile, ["sh", "-c", script])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "origin rc 2" in result.stdout and "api rc 0" in result.stdout, result.stdout + result.stderr
