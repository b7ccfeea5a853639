"""`netcond run --engine packet`: the program's own packets through the link, with real clients.

Every destination is on this host (127.0.0.1 or ::1). Each test checks what the program sees
(never earlier than the emulated delay, at most a generous factor later on a loaded 2-core
machine) and that netcond leaves no cgroup, nft table or iptables rule behind. Needs root (or
CAP_NET_ADMIN), nft and iptables: skipped, with the reason, without them.
"""
import contextlib
import hashlib
import http.server
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import NETCOND, closed_port, packet_engine_missing, run, wait_until, write_profile
from packet_state import CGROUP_ROOT, _leftovers, leftovers, leftovers_of, run_id_of, table_lock

pytestmark = pytest.mark.skipif(packet_engine_missing() is not None, reason=packet_engine_missing() or "")


@pytest.fixture(autouse=True)
def clean_host():
    """Each test leaves nothing of a packet engine on the host: what gone runs left after it, and
    was not there before it (another job's netcond killed by SIGKILL leaves its cage until the next
    run starts; that is not this test's), is a leak of this test's runs."""
    before = set(leftovers())
    yield
    assert wait_until(lambda: not set(leftovers()) - before, seconds=5), sorted(set(leftovers()) - before)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        # /SIZE, or /SIZE/paced: the body written 64 KB every 20 ms (a download that lasts, whatever
        # the client; curl's --limit-rate lets a 3 MB body through in 0.5 s here).
        path, _, pacing = self.path.strip("/").partition("/")
        size = int(path or "5")
        body = bytes(i % 251 for i in range(size))
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if pacing != "paced":
            self.wfile.write(body)
            return
        for start in range(0, size, 65536):
            self.wfile.write(body[start:start + 65536])
            self.wfile.flush()
            time.sleep(0.02)

    def log_message(self, *args):
        pass


class _Server6(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


@contextlib.contextmanager
def http_server(host="127.0.0.1"):
    """A plain HTTP server on this host (a developer's localhost:8000); yields its base URL."""
    server = (_Server6 if ":" in host else http.server.ThreadingHTTPServer)((host, 0), _Handler)
    # A connection that is reset while it waits in the backlog makes the listener readable, then
    # gone: a blocking accept() would wait for ever, and shutdown() with it. With a time-out the
    # accept fails, the server loop goes on, and shutdown() returns.
    server.socket.settimeout(1.0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        yield f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def udp_server(echo=True, host="127.0.0.1"):
    """A UDP server on `host` that echoes what it gets (or only keeps it); yields its port and the
    list of datagrams it got."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, 0))
    sock.settimeout(0.2)
    stop = threading.Event()
    received = []

    def serve():
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(4096)
            except socket.timeout:
                continue
            received.append(data)
            if echo:
                sock.sendto(data, peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], received
    finally:
        stop.set()
        thread.join(2)
        sock.close()


@contextlib.contextmanager
def udp_echo(host="127.0.0.1"):
    """A UDP echo server on `host`; yields its port."""
    with udp_server(host=host) as (port, _):
        yield port


def delay_profile(tmp, one_way_ms, extra=""):
    return write_profile(tmp, "delay", f"""
name: delay
description: {one_way_ms} ms each way
up:
  latency: {one_way_ms}ms
{extra}down:
  latency: {one_way_ms}ms
""")


def packet_run(profile, command, timeout=120, **kwargs):
    result = run(["run", "--engine", "packet", "--seed", "3", profile, "--", *command], timeout=timeout, **kwargs)
    # A packet let go at once that the link then held, dropped or changed: never, in any run.
    assert "netcond's own error" not in result.stderr, result.stderr
    return result


def test_packets_let_go_at_once_through_phases_that_hold_them_and_phases_that_do_not_arrive_intact(tmp):
    # Pass-through phases (the engine lets packets go as soon as it reads them, the link's
    # bookkeeping after) between phases with latency and a stall, while a download runs: every byte
    # arrives, in order, the flow table and counters follow every packet, and no packet let go at
    # once was one the link would have held (the summary would say so: packet_run checks it).
    profile = write_profile(tmp, "phases", """
name: phases
link: {latency: 0ms}
schedule:
  phases:
    - {name: open, for: 150ms}
    - {name: slow, for: 100ms, link: {latency: 15ms}}
    - {name: open-again, for: 150ms}
    - {name: stuck, for: 80ms, stall: down}
""")
    with http_server() as url:
        out = os.path.join(tmp, "body")
        # Paced by the server (46 writes 20 ms apart): the download lasts past the first stall (at
        # 0.4 s) however fast the machine.
        result = packet_run(profile, ["curl", "-sS", "-o", out, url + "/3000000/paced"])
        assert result.returncode == 0, result.stderr
        with open(out, "rb") as f:
            body = f.read()
    expected = bytes(i % 251 for i in range(3000000))
    assert hashlib.sha256(body).digest() == hashlib.sha256(expected).digest()
    summary = re.search(r"up .* in (\d+) packets, down .* in (\d+) packets", result.stderr)
    assert summary, result.stderr
    assert int(summary.group(1)) > 20 and int(summary.group(2)) > 1000, result.stderr
    # The download met every phase: the link let packets go at once, held them, and stalled.
    met = re.findall(r"link: ([\w-]+)", result.stderr)
    assert {"slow", "stuck", "open-again"} <= set(met), result.stderr


PING_CLIENT = r"""
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    start = time.monotonic()
    s.sendall(b"x" * 64)
    got = b""
    while len(got) < 64:
        got += s.recv(64 - len(got))
    print(round((time.monotonic() - start) * 1000, 2), flush=True)
    time.sleep(0.02)
"""


@contextlib.contextmanager
def tcp_echo():
    """A TCP echo server on 127.0.0.1 (each connection served by a thread of its own); yields its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()
    threads = []

    def serve(connection):
        with connection:
            connection.settimeout(30)
            try:
                while data := connection.recv(4096):
                    connection.sendall(data)
            except OSError:
                pass

    def accept():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except (socket.timeout, OSError):
                continue
            thread = threading.Thread(target=serve, args=(connection,), daemon=True)
            thread.start()
            threads.append(thread)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        acceptor.join(2)
        listener.close()
        for thread in threads:
            thread.join(2)


def passed_in_kernel(stderr):
    found = re.search(r"(\d+) packets? passed at once by the kernel", stderr)
    return int(found.group(1)) if found else 0


def test_a_link_that_holds_nothing_back_is_passed_by_the_kernel_and_every_packet_is_counted(tmp):
    # Nothing on the link: the kernel passes every packet (no verdict waits for netcond), and the
    # copies still give the summary every packet, both ways.
    profile = write_profile(tmp, "open", "name: open\nlink: {latency: 0ms}\n")
    client = os.path.join(tmp, "ping.py")
    with open(client, "w") as f:
        f.write(PING_CLIENT)
    with tcp_echo() as port:
        result = packet_run(profile, ["python3", client, str(port), "1.5"])
    assert result.returncode == 0, result.stderr
    rtts = [float(x) for x in result.stdout.split()]
    assert len(rtts) >= 10, result.stdout
    summary = re.search(r"up .* in (\d+) packets, down .* in (\d+) packets", result.stderr)
    assert summary, result.stderr
    total = int(summary.group(1)) + int(summary.group(2))
    # The handshake's first packets may come before the kernel passes (it waits for 2 ms of quiet).
    assert total >= 2 * len(rtts) and passed_in_kernel(result.stderr) >= total - 8, result.stderr
    assert "did not see" not in result.stderr, result.stderr


def test_what_the_kernel_passes_is_counted_whichever_way_its_copy_comes(tmp):
    # While the kernel passes, the cgroup's programs copy what the cage's sockets send and get;
    # what has no socket of the cage takes the log: a ping's echo replies (the kernel's own ICMP),
    # and the packets between two processes of the cage (counted once each, not twice). Every one
    # is in the summary, and none is missed.
    profile = write_profile(tmp, "open", "name: open\nlink: {latency: 0ms}\n")
    pinged = packet_run(profile, ["ping", "-n", "-c", "8", "-i", "0.2", "127.0.0.1"])
    assert pinged.returncode == 0, pinged.stdout + pinged.stderr
    assert re.search(r"up .* in 8 packets, down .* in 8 packets", pinged.stderr), pinged.stderr
    assert passed_in_kernel(pinged.stderr) >= 14, pinged.stderr  # the first may come before it passes
    assert "did not see" not in pinged.stderr, pinged.stderr
    client = os.path.join(tmp, "ping.py")
    with open(client, "w") as f:
        f.write(PING_CLIENT)
    # An echo server of the cage's own, and the ping-pong client beside it.
    inner = ("import socket, threading\n"
             "l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n"
             "print(l.getsockname()[1], flush=True)\n"
             "c, _ = l.accept()\n"
             "while d := c.recv(4096): c.sendall(d)\n")
    server = os.path.join(tmp, "inner.py")
    with open(server, "w") as f:
        f.write(inner)
    script = f"python3 {server} > {tmp}/port & sleep 0.5; python3 {client} $(cat {tmp}/port) 1.0; wait"
    both = packet_run(profile, ["sh", "-c", script])
    assert both.returncode == 0, both.stdout + both.stderr
    rtts = [float(x) for x in both.stdout.split()]
    assert len(rtts) >= 10, both.stdout
    summary = re.search(r"up .* in (\d+) packets?, down .* in (\d+) packets?", both.stderr)
    assert summary, both.stderr
    total = int(summary.group(1)) + int(summary.group(2))
    # Each exchange's two packets once (TCP may add a few ACKs), the handshake and the close.
    assert 2 * len(rtts) <= total <= 2 * len(rtts) + 12, both.stderr
    assert passed_in_kernel(both.stderr) >= total - 8 and "did not see" not in both.stderr, both.stderr


def test_the_kernel_stops_passing_before_each_change_and_every_change_meets_the_packets(tmp):
    # Open phases (the kernel passes) between a slow one and a stall, and live changes: every slow
    # round trip takes the phase's latency, the stall holds the echo, nothing passes too soon.
    profile = write_profile(tmp, "phases", """
name: phases
link: {latency: 0ms}
schedule:
  phases:
    - {name: open, for: 700ms}
    - {name: slow, for: 500ms, link: {latency: 40ms}}
    - {name: open-again, for: 700ms}
    - {name: stuck, for: 300ms, stall: down}
""")
    client = os.path.join(tmp, "ping.py")
    with open(client, "w") as f:
        f.write(PING_CLIENT)
    with tcp_echo() as port:
        result = packet_run(profile, ["python3", client, str(port), "4.5"])
    assert result.returncode == 0, result.stderr
    rtts = [float(x) for x in result.stdout.split()]
    assert passed_in_kernel(result.stderr) > 20, result.stderr
    # Each phase came twice: round trips at loopback speed, at 80 ms or more, and held by the stall.
    fast = [r for r in rtts if r < 20]
    slow = [r for r in rtts if 80 <= r < 200]
    stalled = [r for r in rtts if r >= 200]
    assert len(fast) >= 20 and len(slow) >= 5 and stalled, rtts
    # Never between: a round trip in a slow phase that took less than its latency passed too soon
    # (one that straddles a phase's start or end may take part of it).
    assert len([r for r in rtts if 20 <= r < 80]) <= 4, rtts
    assert "link: slow" in result.stderr and "link: stuck" in result.stderr


def test_live_changes_stop_the_kernel_passing_at_once(tmp):
    """Each live change (a slower profile, an outage) meets the very next connection, made while
    the kernel passed packets a moment before; once the link is empty again the kernel passes
    again."""
    profile = write_profile(tmp, "open", "name: open\nlink: {latency: 0ms}\n")
    slower = write_profile(tmp, "slower", "name: slower\nup:\n  latency: 300ms\ndown:\n  latency: 300ms\n")
    script = f"""
curl -sS -o /dev/null -w "before: %{{time_connect}}\\n" http://origin.netcond.test/bytes/10
{NETCOND} ctl profile {slower} > /dev/null
curl -sS -o /dev/null -w "switched: %{{time_connect}}\\n" http://origin.netcond.test/bytes/10
{NETCOND} ctl profile {profile} > /dev/null
sleep 0.8
curl -sS -o /dev/null -w "open: %{{time_connect}}\\n" http://origin.netcond.test/bytes/10
{NETCOND} ctl outage blackhole > /dev/null
curl -sS -m 1 -o /dev/null http://origin.netcond.test/bytes/10; echo "during: $?"
{NETCOND} ctl outage end > /dev/null
sleep 0.3
curl -sS -o /dev/null -w "after: %{{http_code}}\\n" http://origin.netcond.test/bytes/10
"""
    result = packet_run(profile, ["sh", "-c", script])
    assert result.returncode == 0, result.stderr
    values = dict(line.split(": ") for line in result.stdout.splitlines() if ": " in line)
    assert float(values["before"]) < 0.3 and float(values["open"]) < 0.3, result.stdout
    assert 0.6 <= float(values["switched"]) < 2.0, result.stdout
    assert values["during"] == "28" and values["after"] == "200", result.stdout
    # The kernel passed again once what the slow link and the outage held had left it (the
    # first, third and last connections: about 10 packets each).
    assert passed_in_kernel(result.stderr) >= 25, result.stderr


def test_tcp_to_a_server_on_this_host_crosses_the_link_both_ways_and_arrives_intact(tmp):
    profile = delay_profile(tmp, 100)
    with http_server() as url:
        out = os.path.join(tmp, "body")
        result = packet_run(profile, [
            "curl", "-sS", "-o", out, "-w", "%{time_connect} %{time_starttransfer}", url + "/300000"])
        assert result.returncode == 0, result.stderr
        connect, first_byte = (float(x) for x in result.stdout.split())
        # The handshake is one round trip (200 ms); the first byte comes a round trip later.
        assert 0.2 <= connect < 2.0
        assert 0.4 <= first_byte < 2.0
        with open(out, "rb") as f:
            body = f.read()
        expected = bytes(i % 251 for i in range(300000))
        assert hashlib.sha256(body).digest() == hashlib.sha256(expected).digest()
    assert re.search(r"netcond: delay \([^)]*delay.yaml\) \(packet engine\): .*up .* in \d+ packets, down .* in \d+ packets, "
                     r"no packet lost.*\(seed 3\)", result.stderr), result.stderr


def test_the_built_in_origin_is_reached_by_its_name_over_http_and_https(tmp):
    profile = delay_profile(tmp, 100)
    with open("/etc/hosts") as f:
        hosts_before = f.read()
    script = (
        'curl -sS -o /dev/null -w "%{http_code} %{time_connect}\\n" "$NETCOND_ORIGIN/bytes/1000" && '
        'curl -sS -o /dev/null -w "%{http_code} %{time_connect}\\n" https://origin.netcond.test/bytes/1000'
    )
    result = packet_run(profile, ["sh", "-c", script])
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines()]
    assert [code for code, _ in lines] == ["200", "200"], result.stdout
    assert all(0.2 <= float(connect) < 2.0 for _, connect in lines), result.stdout
    # The name exists for the command only: the machine's /etc/hosts is as it was.
    with open("/etc/hosts") as f:
        assert f.read() == hosts_before


def test_with_user_the_command_runs_as_that_user_and_cannot_leave_the_link(tmp):
    """sudo netcond run --engine packet --user "$USER": the command is that user's (its id, groups and
    home), still in the cage with the origin's name and trust, and as that user it can neither move
    itself out of the cgroup nor read netcond's firewall."""
    nobody = pwd.getpwnam("nobody")
    profile = delay_profile(tmp, 100)
    script = (
        'echo "ids $(id -u) $(id -g) $HOME $USER"; '
        f'(echo $$ > {CGROUP_ROOT}/cgroup.procs) 2>/dev/null && echo left || echo stayed; '
        'grep -c netcond- /proc/self/cgroup; '
        '(nft list tables) >/dev/null 2>&1 && echo firewall || echo "no firewall"; '
        'curl -sS -o /dev/null -w "%{http_code} %{time_connect}\\n" https://origin.netcond.test/bytes/1000'
    )
    result = run(["run", "--engine", "packet", "--user", "nobody", "--seed", "3", profile, "--", "sh", "-c", script],
                 timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"ids {nobody.pw_uid} {nobody.pw_gid} {nobody.pw_dir} nobody", lines
    assert lines[1:4] == ["stayed", "1", "no firewall"], lines
    code, connect = lines[4].split()
    assert code == "200" and 0.2 <= float(connect) < 2.0, lines  # through the link, with the run's CA trusted
    # The numeric id names the same user; an unknown one is refused before anything runs.
    marker = os.path.join(tmp, "ran")
    unknown = run(["run", "--engine", "packet", "--user", "no-such-user-here", profile, "--", "touch", marker])
    assert unknown.returncode == 2 and "--user 'no-such-user-here': no such user" in unknown.stderr
    assert not os.path.exists(marker)
    proxy = run(["run", "--user", "nobody", "edge", "--", "touch", marker])
    assert proxy.returncode == 2 and "--user is for the packet engine" in proxy.stderr
    assert not os.path.exists(marker)


UNCAGED = "the command runs as root: it can leave the link's cgroup or change the firewall"


def test_a_root_command_that_leaves_the_cgroup_or_changes_the_rules_is_told(tmp):
    """Root without --user: one line before says what that allows and that --user prevents it; a
    command that moves itself out of the cgroup (its packets then bypass the link: a 100 ms link
    connects in well under 100 ms) or removes this run's own iptables rules is named afterwards,
    even with --quiet, and a process it left outside the cage is ended with the run. A command
    that does neither gets no such line."""
    profile = delay_profile(tmp, 100)
    with http_server() as url:
        plain = packet_run(profile, ["curl", "-sS", "-o", "/dev/null", url + "/10"])
        assert plain.returncode == 0, plain.stderr
        assert plain.stderr.count(UNCAGED) == 1 and "did not hold" not in plain.stderr, plain.stderr

        pidfile = os.path.join(tmp, "escaped")
        leave = (f'echo $$ > {CGROUP_ROOT}/cgroup.procs; sleep 60 & echo $! > {pidfile}; '
                 f'curl -sS -o /dev/null -w "%{{time_connect}}" {url}/10')
        left = packet_run(profile, ["sh", "-c", leave])
        assert left.returncode == 0, left.stderr
        assert float(left.stdout) < 0.2, left.stdout  # it bypassed the link
        assert re.search(r"netcond: at \+[\d.]+ s, process \d+ \(sh\) left the link's cgroup for /: its packets from "
                         r"then on bypassed the link; the profile's conditions did not hold", left.stderr), left.stderr
        with open(pidfile) as f:
            escaped = int(f.read())
        assert wait_until(lambda: not os.path.exists(f"/proc/{escaped}"), seconds=5), "the escaped process outlived the run"

        # Only this run's own rules (named after its cage): other runs on the host keep theirs.
        unrule = ('cage=$(grep -o "netcond-[0-9a-z]*" /proc/self/cgroup | head -n 1); '
                  'for tool in iptables ip6tables; do $tool -w 5 -t mangle -S | grep -- "--comment $cage " | '
                  'sed "s/^-A /-D /" | while read -r rule; do eval $tool -w 5 -t mangle $rule; done; done; '
                  f'curl -sS -o /dev/null {url}/10')
        changed = run(["run", "--engine", "packet", "--quiet", "--seed", "3", profile, "--", "sh", "-c", unrule], timeout=120)
        assert changed.returncode == 0, changed.stderr
        assert "the firewall rules that send the command's packets to the link were changed during the run" in changed.stderr
        assert UNCAGED not in changed.stderr  # --quiet: only what went wrong

        held = run(["run", "--engine", "packet", "--user", "nobody", "--seed", "3", profile, "--",
                    "curl", "-sS", "-o", "/dev/null", url + "/10"], timeout=120)
        assert held.returncode == 0 and UNCAGED not in held.stderr, held.stderr


def test_ipv6_tcp_crosses_the_link(tmp):
    profile = delay_profile(tmp, 100)
    with http_server("::1") as url:
        result = packet_run(profile, ["curl", "-sS", "-o", "/dev/null", "-w", "%{time_connect}", url + "/10"])
    assert result.returncode == 0, result.stderr
    assert 0.2 <= float(result.stdout) < 2.0


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_udp_and_icmp_cross_the_link(tmp, host):
    profile = delay_profile(tmp, 100)
    client = (
        "import socket,sys,time\n"
        "h=sys.argv[2]; s=socket.socket(socket.AF_INET6 if ':' in h else socket.AF_INET,socket.SOCK_DGRAM)\n"
        "s.settimeout(5)\n"
        "for i in range(3):\n"
        "    t=time.monotonic(); s.sendto(b'x'*200,(h,int(sys.argv[1]))); s.recvfrom(4096)\n"
        "    print(time.monotonic()-t)\n"
    )
    with udp_echo(host) as port:
        result = packet_run(profile, ["python3", "-c", client, str(port), host])
    assert result.returncode == 0, result.stderr
    rtts = [float(x) for x in result.stdout.split()]
    assert len(rtts) == 3 and all(0.2 <= rtt < 2.0 for rtt in rtts), rtts
    if shutil.which("ping"):
        pinged = packet_run(profile, ["ping", "-n", "-c", "2", "-i", "0.2", host])
        assert pinged.returncode == 0, pinged.stdout + pinged.stderr
        # ping measures with receive time stamps: the reply waited before it was stamped.
        times = [float(x) for x in re.findall(r"time=([\d.]+) ms", pinged.stdout)]
        assert len(times) == 2 and all(200 <= t < 2000 for t in times), pinged.stdout


def test_rate_holds_a_download_to_the_link_rate(tmp):
    profile = write_profile(tmp, "slow", """
name: slow
description: 2 Mbit/s down
down:
  bandwidth: 2mbit
  latency: 10ms
up:
  latency: 10ms
""")
    with http_server() as url:
        result = packet_run(profile, ["curl", "-sS", "-o", "/dev/null", "-w", "%{time_total}", url + "/500000"])
    assert result.returncode == 0, result.stderr
    # 500 KB (plus headers, ~3 %) at 2 Mbit/s: at least 2.0 s on any machine.
    assert 2.0 <= float(result.stdout) < 6.0


def test_a_schedule_blackholes_and_stalls_the_link_at_its_moments(tmp):
    if not shutil.which("ping"):
        pytest.skip("ping (iputils-ping) is not installed")
    profile = write_profile(tmp, "blink", """
name: blink
description: on, blackhole, down stalled, 1 s each
up:
  latency: 10ms
down:
  latency: 10ms
schedule:
  repeat: false
  phases:
    - name: on
      for: 1s
    - name: off
      for: 1s
      outage: blackhole
    - name: stuck
      for: 1s
      stall: down
""")
    result = packet_run(profile, ["ping", "-n", "-c", "20", "-i", "0.2", "-W", "3", "127.0.0.1"])
    replies = {int(seq): float(t) for seq, t in re.findall(r"icmp_seq=(\d+) ttl=\d+ time=([\d.]+) ms", result.stdout)}
    # Pings sent during the blackhole (its second of the schedule: about 5 pings) get no answer;
    # those sent next, while the way down is stalled, come back together when it ends, the earliest
    # having waited longest. The schedule's clock starts with the run, ping a little later (how much
    # later depends on the machine's load): the shape is judged, not which sequence numbers.
    lost = [seq for seq in range(1, 21) if seq not in replies]
    assert 4 <= len(lost) <= 6 and lost == list(range(lost[0], lost[0] + len(lost))), (lost, result.stdout)
    stalled_seqs = [seq for seq in sorted(replies) if replies[seq] > 100]
    assert 4 <= len(stalled_seqs) <= 6, result.stdout
    assert stalled_seqs == list(range(lost[-1] + 1, lost[-1] + 1 + len(stalled_seqs))), (lost, stalled_seqs, result.stdout)
    stalled = [replies[seq] for seq in stalled_seqs]
    assert stalled == sorted(stalled, reverse=True), result.stdout
    assert all(20 <= t < 1500 for t in replies.values()), result.stdout
    assert "link: off, outage (blackhole)" in result.stderr and "link: stuck, stalled down" in result.stderr
    assert re.search(r"\d+ packets lost \(\d+ in outages\)", result.stderr), result.stderr


TRICKLE_SERVER = """
import socket, sys, threading, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
print(srv.getsockname()[1], flush=True)
srv.settimeout(1)
def handle(c):
    try:
        while True:
            c.sendall(b"x" * 100); time.sleep(0.1)
    except OSError as e:
        print("server:", type(e).__name__, flush=True)
end = time.monotonic() + 10
while time.monotonic() < end:
    try:
        c, _ = srv.accept()
    except socket.timeout:
        continue
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"""

TRICKLE_CLIENT = """
import socket, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
try:
    while s.recv(4096):
        pass
    print("eof")
except OSError as e:
    print("cut:", type(e).__name__)
time.sleep(0.2)
t = time.monotonic()
try:
    socket.create_connection(("127.0.0.1", port), timeout=5)
    print("connected during the outage")
except OSError as e:
    print("reconnect:", type(e).__name__, time.monotonic() - t)
"""


def test_a_reset_outage_resets_both_ends_and_refuses_new_connections(tmp):
    profile = write_profile(tmp, "resetty", """
name: resetty
description: on 1 s, reset 2 s
up:
  latency: 50ms
down:
  latency: 50ms
schedule:
  repeat: false
  phases:
    - name: on
      for: 1s
    - name: cut
      for: 2s
      outage: reset
""")
    server = subprocess.Popen(["python3", "-c", TRICKLE_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        capture = os.path.join(tmp, "resets.pcap")
        result = run(["run", "--engine", "packet", "--seed", "3", "--pcap", capture, profile, "--",
                      "python3", "-c", TRICKLE_CLIENT, str(port)], timeout=120)
        assert result.returncode == 0, result.stderr
        # The client's connection gets a real RST (ECONNRESET, not a close), and so does the server's.
        assert "cut: ConnectionResetError" in result.stdout, result.stdout
        server_said = server.stdout.readline()
        assert "server: ConnectionResetError" in server_said or "server: BrokenPipeError" in server_said, server_said
        # A new connection is refused after one round trip (100 ms), as by a far end turning it away.
        refused = re.search(r"reconnect: ConnectionRefusedError ([\d.]+)", result.stdout)
        assert refused and 0.1 <= float(refused.group(1)) < 2.0, result.stdout
        assert "1 connection cut by the link" in result.stderr and "1 connection refused" in result.stderr
        # netcond's own resets are in the capture: one to each end for the cut, RST|ACK for the refusal.
        if shutil.which("tcpdump"):
            lines = subprocess.run(["tcpdump", "-nn", "-r", capture], capture_output=True, text=True).stdout.splitlines()
            assert sum(f".{port} > " in l and "Flags [R]" in l for l in lines) >= 1, lines
            assert sum(f"> 127.0.0.1.{port}:" in l and "Flags [R]" in l for l in lines) >= 1, lines
            assert any("Flags [R.]" in l and ", ack " in l for l in lines), lines
    finally:
        server.kill()
        server.wait(10)


def test_live_control_from_inside_the_command_drives_the_link(tmp):
    """The command starts an outage with netcond ctl, sees its curl time out as on a dead network,
    ends it (the control API is reachable through any outage) and connects again."""
    profile = delay_profile(tmp, 50)
    script = f"""
{NETCOND} ctl outage blackhole > /dev/null
curl -sS -m 1 -o /dev/null http://origin.netcond.test/bytes/10; echo "during: $?"
{NETCOND} ctl outage end > /dev/null
curl -sS -o /dev/null -w "after: %{{http_code}}\\n" http://origin.netcond.test/bytes/10
{NETCOND} ctl status --json
{NETCOND} ctl fault add '{{status: 503}}'; echo "fault: $?"
{NETCOND} ctl cut close; echo "cut close: $?"
"""
    result = packet_run(profile, ["sh", "-c", script])
    assert result.returncode == 0, result.stderr
    assert "during: 28" in result.stdout  # curl's own time-out: the SYNs went unanswered
    assert "after: 200" in result.stdout
    import json
    status = json.loads(result.stdout[result.stdout.index("{"):result.stdout.rindex("}") + 1])
    assert status["engine"] == "packet" and status["outage"] is None and status["outage_drops"] >= 1
    # netcond's own timing: a verdict for each packet let through (the second curl's connection at
    # least: SYN, SYN-ACK, ACK, request, response), how late against the link's moment, in order.
    late = status["timer_late_us_p50_p99_max"]
    assert status["timer_wakeups"] >= 5 and len(late) == 3 and 0 <= late[0] <= late[1] <= late[2], status
    assert "fault: 2" in result.stdout and "need a proxy that reads HTTP" in result.stderr
    assert "cut close: 2" in result.stdout and "resets only" in result.stderr
    assert "link: delay, outage (blackhole)" in result.stderr


def test_live_control_switches_the_profile_and_stalls_a_direction(tmp):
    """netcond ctl profile: the new latency holds for the next connection (the connect takes its round
    trip); ctl stall down: nothing comes back until it ends, then the link carries again."""
    profile = delay_profile(tmp, 20)
    slower = write_profile(tmp, "slower", "name: slower\nup:\n  latency: 300ms\ndown:\n  latency: 300ms\n")
    script = f"""
curl -sS -o /dev/null -w "before: %{{time_connect}}\\n" http://origin.netcond.test/bytes/10
{NETCOND} ctl profile {slower} > /dev/null
curl -sS -o /dev/null -w "switched: %{{time_connect}}\\n" http://origin.netcond.test/bytes/10
{NETCOND} ctl stall down > /dev/null
curl -sS -m 2 -o /dev/null http://origin.netcond.test/bytes/10; echo "stalled: $?"
{NETCOND} ctl stall end > /dev/null
curl -sS -o /dev/null -w "after: %{{http_code}}\\n" http://origin.netcond.test/bytes/10
"""
    result = packet_run(profile, ["sh", "-c", script])
    assert result.returncode == 0, result.stderr
    values = dict(line.split(": ") for line in result.stdout.splitlines() if ": " in line)
    assert 0.04 <= float(values["before"]) < 0.5, result.stdout
    assert 0.6 <= float(values["switched"]) < 2.0, result.stdout
    assert values["stalled"] == "28" and values["after"] == "200", result.stdout


def test_pcap_holds_every_packet_the_link_delivered_and_pcap_drops_those_it_lost(tmp):
    if not shutil.which("tcpdump"):
        pytest.skip("tcpdump is not installed")
    profile = write_profile(tmp, "lossy", """
name: lossy
description: 20 ms each way, 3 % loss down
up:
  latency: 20ms
down:
  latency: 20ms
  bandwidth: 10mbit
  loss: 3%
""")
    delivered, dropped = os.path.join(tmp, "link.pcap"), os.path.join(tmp, "drops.pcap")
    result = run(["run", "--engine", "packet", "--seed", "4", "--pcap", delivered, "--pcap-drops", dropped, profile,
                  "--", "curl", "-sS", "-o", "/dev/null", "http://origin.netcond.test/bytes/300000"])
    assert result.returncode == 0, result.stderr

    def read(path):
        out = subprocess.run(["tcpdump", "-nn", "-tt", "-S", "-r", path], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    sent = read(delivered)
    lost = read(dropped)
    up = re.search(r"up \S+ \S+ in (\d+) packets, down \S+ \S+ in (\d+) packets, (\d+) packets lost", result.stderr)
    assert up, result.stderr
    offered, lost_count = int(up.group(1)) + int(up.group(2)), int(up.group(3))
    # Every packet offered to the link is in one of the two files, but for the few still on the
    # link when curl ended (its last ACK and FIN).
    assert len(lost) == lost_count > 0, (len(lost), result.stderr)
    assert 0 <= offered - (len(sent) + len(lost)) <= 10, (len(sent), len(lost), result.stderr)
    # 1,500-byte packets on the wire (the MSS clamp), stamped in the order they left the link.
    lengths = [int(m) for m in re.findall(r"length (\d+)", " ".join(sent))]
    assert max(lengths) == 1448
    stamps = [float(line.split()[0]) for line in sent]
    assert stamps == sorted(stamps)
    assert any("Flags [S]" in line for line in sent)
    # The lost data came back: a retransmission of each lost segment is in the delivered file.
    lost_data = {line.split("seq ")[1].split(":")[0] for line in lost if "seq " in line and "length 1448" in line}
    delivered_data = {line.split("seq ")[1].split(":")[0] for line in sent if "seq " in line}
    assert lost_data and lost_data <= delivered_data
    bad = run(["run", "--pcap", delivered, profile, "--", "true"])
    assert bad.returncode == 2 and "--engine packet" in bad.stderr


def test_reordering_lets_later_packets_overtake_and_the_proxy_refuses_it(tmp):
    profile = write_profile(tmp, "reorder", """
name: reorder
description: 20 % of packets held back 30 ms
up:
  latency: 5ms
  reorder: {probability: 20%, gap: 30ms}
  queue: 100 packets
down:
  latency: 5ms
""")
    sender = (
        "import socket,sys,time\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "for i in range(200):\n"
        "    s.sendto(str(i).encode(),('127.0.0.1',int(sys.argv[1]))); time.sleep(0.001)\n"
        "time.sleep(0.3)\n"
    )
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(0.5)
    try:
        result = packet_run(profile, ["python3", "-c", sender, str(receiver.getsockname()[1])])
        assert result.returncode == 0, result.stderr
        order = []
        while True:
            try:
                order.append(int(receiver.recv(100)))
            except socket.timeout:
                break
    finally:
        receiver.close()
    # Every datagram arrives (no loss), but some after ones sent later: 20 % of 200, give or take.
    assert sorted(order) == list(range(200)), order
    # Held back: arrived after a datagram sent later than it.
    held, highest = 0, -1
    for n in order:
        if n < highest:
            held += 1
        highest = max(highest, n)
    assert 15 <= held <= 70, (held, order)
    refused = run(["run", profile, "--", "true"])
    assert refused.returncode == 2 and "only the packet engine emulates" in refused.stderr


def test_no_proxy_variables_are_set_and_the_engine_is_named(tmp):
    profile = delay_profile(tmp, 1)
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    result = subprocess.run([NETCOND, "run", "--engine", "packet", profile, "--", "env"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines() if "=" in line}
    assert not {n for n in names if "proxy" in n.lower()}, names
    assert "NETCOND_ENGINE=packet" in result.stdout


def test_the_commands_tcp_sockets_have_a_real_paths_mss_and_others_keep_loopbacks(tmp):
    """A socket on loopback advertises a 65,483-byte MSS and tunes its receive buffer from it, so a
    download's window opens later than on a real path: the cage's sockets, connecting and
    accepting, IPv4 and IPv6, get a 1,500-byte path's (1460 and 1440), as their route would give
    them on a network. A socket outside the cage keeps loopback's."""
    script = (
        "import socket,struct\n"
        "def advmss(s): return struct.unpack_from('I', s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104), 84)[0]\n"
        "for family, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):\n"
        "    l=socket.socket(family); l.bind((host,0)); l.listen()\n"
        "    c=socket.create_connection((host, l.getsockname()[1])); a,_=l.accept()\n"
        "    print(advmss(c), advmss(a))\n"
        "    for s in (c,a,l): s.close()\n"
        "l=socket.socket(); l.bind(('127.0.0.1',0)); l.listen()\n"
        "c=socket.socket(socket.AF_INET6); c.connect(('::ffff:127.0.0.1', l.getsockname()[1])); a,_=l.accept()\n"
        "print(advmss(c), advmss(a))\n"
    )
    result = packet_run(delay_profile(tmp, 1), ["python3", "-c", script])
    assert result.returncode == 0, result.stderr
    # 1460 and 1440 less the 12 bytes of the timestamp option each segment carries; a dual-stack
    # socket to an IPv4-mapped address is on an IPv4 path.
    assert result.stdout.split() == ["1448", "1448", "1428", "1428", "1448", "1448"], result.stdout
    assert "MSS" not in result.stderr, result.stderr
    # Outside the cage nothing changed.
    outside = subprocess.run(["python3", "-c", script], capture_output=True, text=True, timeout=30)
    assert outside.returncode == 0, outside.stderr
    assert all(int(v) > 60000 for v in outside.stdout.split()), outside.stdout


def test_a_refused_connection_is_refused_at_once_as_on_a_real_network(tmp):
    """curl --retry 5 ends with exit 7 after one round trip: a refusal is not retried (no proxy 502)."""
    profile = delay_profile(tmp, 100)
    port = closed_port()
    result = packet_run(profile, ["curl", "-sS", "--retry", "5", "-w", "%{time_total}", f"http://127.0.0.1:{port}/"])
    assert result.returncode == 7, result.stderr
    assert "Could not connect" in result.stderr or "Failed to connect" in result.stderr
    # curl's own time (the cage's set-up, shared with other jobs' runs, is not the client's): retries
    # would have taken 1 + 2 + 4 + 8 + 16 s.
    assert float(result.stdout.strip().splitlines()[-1]) < 5.0, result.stdout


def test_a_daemon_the_command_leaves_is_killed_with_the_cgroup(tmp):
    profile = delay_profile(tmp, 1)
    marker = os.path.join(tmp, "pid")
    result = packet_run(profile, ["sh", "-c", f"setsid sleep 60 & echo $! > {marker}"])
    assert result.returncode == 0, result.stderr
    with open(marker) as f:
        pid = int(f.read())
    assert wait_until(lambda: not os.path.exists(f"/proc/{pid}"), seconds=5)


def test_what_a_netcond_killed_by_sigkill_left_is_removed_by_the_next(tmp):
    profile = delay_profile(tmp, 1)
    marker = os.path.join(tmp, "started")
    # The command starts once the cage is whole (cgroup, nft chains, iptables rules): kill after that.
    process = subprocess.Popen([NETCOND, "run", "--engine", "packet", profile, "--", "sh", "-c",
                                f"touch {marker}; exec sleep 60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: os.path.exists(marker), seconds=20)
        run_id = run_id_of(process.pid)
        assert run_id, "no cage seen"
        # Killed and read under the table's lock: another job's run starting meanwhile would clean
        # up what this one left before it could be seen.
        with table_lock():
            process.kill()
            process.wait(10)
            left = leftovers_of(run_id, live=_leftovers(True))
        assert any("cgroup" in x for x in left) and any("nft" in x for x in left) and any("iptables" in x for x in left), left
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    # The child died with netcond (parent-death signal); the next packet-engine run cleans up.
    result = packet_run(profile, ["true"])
    assert result.returncode == 0, result.stderr
    assert leftovers_of(run_id) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_netcond_stops_the_command_and_removes_the_cage(tmp, sig):
    """Ctrl-C or a CI runner's SIGTERM: the command gets the signal, and once it has gone, so do the
    cgroup, the nft chains and the iptables rules (the fixture checks the host is clean after)."""
    profile = delay_profile(tmp, 1)
    marker, pidfile = os.path.join(tmp, "started"), os.path.join(tmp, "pid")
    process = subprocess.Popen([NETCOND, "run", "--engine", "packet", profile, "--", "sh", "-c",
                                f"echo $$ > {pidfile}; touch {marker}; exec sleep 60"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: os.path.exists(marker), seconds=20)
        run_id = run_id_of(process.pid)
        assert run_id and leftovers_of(run_id)
        child = int(open(pidfile).read())
        process.send_signal(sig)
        assert process.wait(timeout=30) == 128 + sig
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z"
    assert leftovers_of(run_id) == []


def test_without_privilege_it_exits_3_naming_what_is_missing(tmp):
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    open_dir = os.path.join(tmp, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)  # the unprivileged command could write here, were it run
    marker = os.path.join(open_dir, "ran")
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
         NETCOND, "run", "--engine", "packet", "edge", "--", "touch", marker],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr
    assert "root or CAP_NET_ADMIN" in result.stderr and "--engine proxy" in result.stderr
    assert not os.path.exists(marker)


def test_what_the_packet_engine_cannot_do_yet_is_refused_before_anything_runs(tmp):
    marker = os.path.join(tmp, "ran")
    profile = write_profile(tmp, "faulty", "name: faulty\nfaults:\n  - {status: 503}\n")
    result = packet_run(profile, ["touch", marker])
    assert result.returncode == 2
    assert "HTTP faults" in result.stderr and "--engine proxy" in result.stderr
    assert not os.path.exists(marker)
    forward = run(["run", "--engine", "packet", "--forward", "9000=example.invalid:80", "edge", "--", "true"])
    assert forward.returncode == 2 and "--forward" in forward.stderr


PORTAL_SCRIPT = """
curl -sS -m 3 -o /dev/null https://origin.netcond.test/bytes/10; echo "https: $?"
curl -sS -m 3 -o /dev/null -w "http: %{http_code} " http://origin.netcond.test/bytes/10; echo
curl -s -m 3 http://origin.netcond.test/bytes/10 | grep -c "<title>Hotel Wi-Fi"
curl -s -m 3 http://portal.netcond.test/api; echo
curl -s -m 3 -o /dev/null -w "probe: %{http_code}\\n" http://connectivitycheck.gstatic.com/generate_204
python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'closed', ('127.0.0.1', $UDP))"
NETCOND_BIN_PATH ctl status --json | tr -d ' ' | grep -o '"captive_portal":"[a-z]*"'
NETCOND_BIN_PATH ctl captive open > /dev/null
curl -sS -m 3 -o /dev/null -w "open https: %{http_code}\\n" https://origin.netcond.test/bytes/10
curl -s -m 3 -o /dev/null -w "open probe: %{http_code}\\n" http://connectivitycheck.gstatic.com/generate_204
python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'open', ('127.0.0.1', $UDP))"
sleep 0.5
"""


@pytest.mark.parametrize("https,expected", [("reset", "https: 7"), ("blackhole", "https: 28"),
                                             ("wrong-certificate", "https: 60")])
def test_a_closed_portal_meets_the_commands_own_connections_as_a_hotels_network_does(tmp, https, expected):
    """Plain HTTP to any host gets the login page (NAT to the portal), HTTPS meets the profile's
    behaviour as curl sees it on a real portal (refused, timed out, the wrong certificate), UDP is
    lost, the probes and the RFC 8908 API say captive; after `netcond ctl captive open` all goes
    through."""
    profile = write_profile(tmp, "portal", f"name: portal\nextends: captive-hotel\ncaptive_portal: {{http: page, https: {https}}}\n")
    with udp_server(echo=False) as (port, received):
        env = dict(os.environ, UDP=str(port))
        result = packet_run(profile, ["sh", "-c", PORTAL_SCRIPT.replace("NETCOND_BIN_PATH", NETCOND)], env=env)
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert expected in out, out
    assert "http: 200" in out and "\n1\n" in out, out  # the login page, with 200 OK, for the origin's URL
    assert '"captive": true' in out and "probe: 200" in out, out  # the probe got the page, not its 204
    assert '"captive_portal":"closed"' in out, out
    assert "open https: 200" in out and "open probe: 204" in out, out
    assert received == [b"open"], received
    assert "stopped by the closed captive portal" in result.stderr, result.stderr


def _tcp_checksum_errors():
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("InCsumErrors")])


def test_a_corrupted_packet_is_discarded_by_its_receivers_checksum_and_tcp_repairs_the_stream(tmp):
    """`corrupt` changes a bit past the IP header of a packet whose checksum is right: the cage's
    kernel discards it (TcpInCsumErrors counts it, as on a real path), TCP retransmits, and the
    file arrives byte-identical."""
    profile = write_profile(tmp, "corrupt", "name: corrupt\nup:\n  latency: 5ms\n  corrupt: 3%\ndown:\n  latency: 5ms\n  corrupt: 3%\n")
    before = _tcp_checksum_errors()
    with http_server() as url:
        out = os.path.join(tmp, "body")
        result = packet_run(profile, ["curl", "-sS", "-o", out, url + "/1000000"])
    assert result.returncode == 0, result.stderr
    with open(out, "rb") as f:
        assert hashlib.sha256(f.read()).digest() == hashlib.sha256(bytes(i % 251 for i in range(1000000))).digest()
    corrupted = int(re.search(r"(\d+) packets corrupted \(their receiver's checksum discards them\)", result.stderr).group(1))
    assert corrupted > 5, result.stderr
    # Every corrupted packet (both ways: the server's kernel discards the cage's) was caught by a checksum.
    assert _tcp_checksum_errors() - before >= corrupted


def test_a_duplicated_datagram_arrives_twice(tmp):
    profile = write_profile(tmp, "dup", "name: dup\nup:\n  latency: 5ms\n  duplicate: 100%\n")
    client = ("import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
              "for i in range(10): s.sendto(b'd%d' % i, ('127.0.0.1', int(sys.argv[1])))\n")
    with udp_server(echo=False) as (port, got):
        result = packet_run(profile, ["python3", "-c", client, str(port)])
        assert result.returncode == 0, result.stderr
        wait_until(lambda: len(got) >= 20, seconds=3)
    assert sorted(got) == sorted([b"d%d" % i for i in range(10)] * 2), got
    assert "10 packets duplicated" in result.stderr, result.stderr


def test_codel_keeps_the_queueing_delay_low_under_a_bulk_download(tmp):
    """A 1000-packet queue at 4 Mbit/s under a cubic download: CoDel drops at the head once
    packets have waited more than its 5 ms target for 100 ms, so pings stay near the base RTT and
    the summary counts its drops. (The contrast with drop-tail is the virtual-time tests': the
    kernel's HyStart keeps a 5 s download from filling the queue.)"""
    profile = write_profile(tmp, "codel", "name: codel\nup:\n  latency: 10ms\ndown:\n  latency: 10ms\n"
                                          "  bandwidth: 4Mbit\n  queue: 1000 packets\n  aqm: codel\n")
    with http_server() as url:
        script = (f"curl -sS -o /dev/null {url}/2500000 & sleep 1.5; ping -n -c 10 -i 0.2 127.0.0.1; wait")
        result = packet_run(profile, ["sh", "-c", script], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    times = sorted(float(x) for x in re.findall(r"time=([\d.]+) ms", result.stdout))
    # CoDel drops at the head of the one queue whatever waits there, a ping too (it is not
    # fq_codel): most of them come back.
    assert len(times) >= 7, result.stdout
    # Base RTT 20 ms; a standing queue of 1000 packets would add 3 s.
    assert 20 <= times[len(times) // 2] < 250, times
    assert "by CoDel" in result.stderr, result.stderr


def test_a_run_that_ends_takes_no_packet_from_one_still_running(tmp):
    """Two packet-engine runs at once: the short one's clean-up removes only its own chains, so the
    long one's held packets stay held (removing a base chain would flush every NFQUEUE) and its
    summary counts no packet dropped by the kernel."""
    profile = write_profile(tmp, "slow", "name: slow\nup:\n  latency: 50ms\ndown:\n  latency: 50ms\n  bandwidth: 2Mbit\n")
    with http_server() as url:
        long_run = subprocess.Popen(
            [NETCOND, "run", "--engine", "packet", "--seed", "3", profile, "--", "curl", "-sS", "-o", "/dev/null",
             url + "/600000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            run_id = run_id_of(long_run.pid)
            time.sleep(1.0)
            for _ in range(3):
                short = packet_run(profile, ["curl", "-sS", "-o", "/dev/null", url + "/20000"])
                assert short.returncode == 0, short.stderr
            out, err = long_run.communicate(timeout=60)
        finally:
            if long_run.poll() is None:
                long_run.kill()
                long_run.wait(10)
    assert long_run.returncode == 0, err
    assert "dropped by the kernel while netcond held them" not in err, err
    # Its own run left nothing (another job's live runs on this machine are not this test's).
    assert run_id and leftovers_of(run_id) == []


SETUP_SCRIPT = """
curl -sS -o /dev/null -w "held: %{time_connect}\\n" http://portal.netcond.test/api
curl -sS -o /dev/null https://portal.netcond.test/; echo "https: $?"
curl -sS -o /dev/null http://gone.invalid/; echo "name: $?"
curl -sS -o /dev/null http://origin.netcond.test/; echo "origin: $?"
curl -sS -o /dev/null -w "again: %{time_connect}\\n" http://portal.netcond.test/api
"""


def test_setup_rules_meet_the_commands_own_connections_and_lookups(tmp):
    """firewall refuses a port with a real reset (curl exit 7), connect_hold holds the first
    connection's SYNs, dns_fail answers the command's own DNS queries "no such name" (curl exit 6),
    the origin's name included (it leaves the command's /etc/hosts). Every name the test looks up
    matches dns_fail, so no query leaves the machine."""
    profile = write_profile(tmp, "setup", """
name: setup
link:
  latency: 20ms
firewall: {allow_ports: [80], otherwise: refuse}
connect_hold: {for: 2s, first: 1}
dns_fail: ["*.invalid", "*.invalid.*", "origin.netcond.test", "origin.netcond.test.*"]
""")
    result = packet_run(profile, ["sh", "-c", SETUP_SCRIPT])
    out = result.stdout
    assert result.returncode == 0, result.stderr
    held = float(re.search(r"held: ([\d.]+)", out).group(1))
    again = float(re.search(r"again: ([\d.]+)", out).group(1))
    assert 2.0 <= held < 6.0 and again < 1.0, out
    assert "https: 7" in out and "name: 6" in out and "origin: 6" in out, out
    assert "stopped by the firewall" in result.stderr and "1 connection held (connect_hold)" in result.stderr
    assert "answered no such name (dns_fail)" in result.stderr, result.stderr


def test_after_a_stall_what_waited_leaves_at_the_link_rate(tmp):
    """A 1 s stall of a 2 Mbit/s link mid-download: the first packets after it are spaced by
    their time on the wire (6 ms for 1,500 bytes), not released in one burst."""
    if not shutil.which("tcpdump"):
        pytest.skip("tcpdump is not installed")
    profile = write_profile(tmp, "stall", "name: stall\ndown:\n  latency: 20ms\n  bandwidth: 2Mbit\nup:\n"
                                          "  latency: 20ms\nstalls: {every: 2s, for: 1s, direction: down}\n")
    capture = os.path.join(tmp, "link.pcap")
    result = run(["run", "--engine", "packet", "--seed", "3", "--pcap", capture, profile, "--",
                  "curl", "-sS", "-o", "/dev/null", "http://origin.netcond.test/bytes/700000"], timeout=120)
    assert result.returncode == 0, result.stderr
    dump = subprocess.run(["tcpdump", "-nn", "-tt", "-r", capture, "src port 80 and greater 1000"],
                          capture_output=True, text=True, timeout=60).stdout
    times = [float(line.split()[0]) for line in dump.splitlines()]
    after = [i for i in range(1, len(times)) if times[i] - times[i - 1] > 0.8]
    assert after, "no stall seen in the capture"
    first = after[0]
    burst = times[first:first + 11]
    assert len(burst) == 11
    # Ten packets on the wire take 60 ms at 2 Mbit/s; a burst would take well under 5 ms.
    assert burst[-1] - burst[0] >= 0.040, [round(t - burst[0], 4) for t in burst]


def test_a_per_connection_rate_holds_each_connection_not_the_link(tmp):
    """connection_bandwidth 2 Mbit/s on a 20 Mbit/s link: one download of 500 KB takes at least
    its 2 s at 2 Mbit/s, and two at once take about as long as one (each has its own rate)."""
    profile = write_profile(tmp, "percon", "name: percon\ndown:\n  latency: 10ms\n  bandwidth: 20Mbit\n"
                                           "  connection_bandwidth: 2Mbit\n  queue: 256KB\nup:\n  latency: 10ms\n")
    with http_server() as url:
        one = "curl -sS -o /dev/null -w '%{time_total}\\n' " + url + "/500000"
        result = packet_run(profile, ["sh", "-c", f"{one}; ({one} & {one} & wait)"], timeout=120)
    assert result.returncode == 0, result.stderr
    alone, *together = (float(x) for x in result.stdout.split())
    assert 1.9 <= alone < 10, result.stdout
    assert len(together) == 2 and all(1.9 <= t < 2.5 * alone for t in together), result.stdout


def test_a_run_in_another_pid_namespace_takes_no_live_run_for_dead(tmp):
    """A run inside a PID namespace (a container, unshare) cannot see the process of a run outside
    it: that is no proof it is gone. The run outside holds its cgroup's lock and its temporary
    files' live lock, so the one inside, cleaning up after dead runs as every run does at start,
    leaves its cgroup, rules and files alone: its command finishes, its HTTPS trust intact."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare (util-linux)")
    # The outer command starts, then (after the inner run has come and gone) uses what the run keeps
    # in temporary files: the origin's certificate authority (SSL_CERT_FILE).
    outer_command = ('echo started; sleep 3; curl -sS -o /dev/null --cacert "$SSL_CERT_FILE" '
                     'https://origin.netcond.test/bytes/10 && echo outer-done')
    outer = subprocess.Popen([NETCOND, "run", "--engine", "packet", "none", "--", "sh", "-c", outer_command],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert outer.stdout.readline() == "started\n"
        run_id = run_id_of(outer.pid)
        inner = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", NETCOND, "run", "--engine", "packet", "none",
                                "--", "echo", "inner-ok"], capture_output=True, text=True, timeout=60)
        assert inner.returncode == 0 and "inner-ok" in inner.stdout, inner.stderr
        out, err = outer.communicate(timeout=30)
    finally:
        if outer.poll() is None:
            outer.kill()
            outer.wait(10)
    assert outer.returncode == 0 and "outer-done" in out, err
    assert run_id and leftovers_of(run_id) == []


def test_a_captures_time_sequence_graph_shows_the_links_drops_and_their_retransmissions(tmp):
    """A download over a lossy link, captured (--pcap, --pcap-drops), drawn with netcond report
    --tcptrace: the page counts the segments the link dropped and the retransmissions, and every
    drop is drawn; a bad call is refused with the reason."""
    profile = write_profile(tmp, "lossy", """
name: lossy
down:
  bandwidth: 4Mbit
  latency: 20ms
  loss: 3%
up:
  latency: 20ms
""")
    delivered, dropped, page = (os.path.join(tmp, name) for name in ("d.pcap", "x.pcap", "t.html"))
    with http_server() as url:
        result = run(["run", "--engine", "packet", "--seed", "5", "--quiet", "--pcap", delivered, "--pcap-drops", dropped,
                      profile, "--", "curl", "-sS", "-o", "/dev/null", url + "/400000"], timeout=120)
    assert result.returncode == 0, result.stderr
    drawn = run(["report", "--tcptrace", delivered, "--drops", dropped, "--html", page])
    assert drawn.returncode == 0, drawn.stderr
    html = open(page).read()
    facts = re.search(r"(\d+) KB sent in [\d.]+ s · (\d+) retransmissions? · (\d+) segments? dropped by the link", html)
    assert facts, html[:2000]
    sent, retransmissions, drops = (int(v) for v in facts.groups())
    assert 380 <= sent <= 400 and drops >= 1 and retransmissions >= 1, facts.group(0)
    crosses = re.search(r'<path class="drop" d="([^"]*)"', html).group(1)
    assert crosses.count("M") == drops
    # What cannot be drawn says why.
    missing = run(["report", "--tcptrace", os.path.join(tmp, "none.pcap"), "--html", page])
    assert missing.returncode == 2 and "none.pcap" in missing.stderr, missing.stderr
    alone = run(["report", "--drops", dropped, "--html", page])
    assert alone.returncode == 2 and "--drops goes with --tcptrace" in alone.stderr, alone.stderr
