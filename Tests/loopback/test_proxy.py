"""The proxy with real clients: bytes intact, protocols, errors, timing within generous tolerance."""
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import (NETCOND, EchoServer, assert_descriptors_return, settled_descriptors, closed_port, curl, free_port, origin_bytes, read_to_eof, run, run_listening, listening_port, stop_process, wait_until,
                      write_profile)


def test_edge_download_is_intact_and_never_faster_than_the_link(tmp):
    out = os.path.join(tmp, "x")
    started = time.monotonic()
    result = run(["run", "edge", "--seed", "3", "--", "curl", "-sS", "-o", out,
                  "http://origin.netcond.test/bytes/200KB"])
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert open(out, "rb").read() == origin_bytes(200 * 1024)
    # 200 KB at 240 kbit/s with 40 bytes of header per 1460: at least 7.0 s on the link alone.
    assert elapsed >= 200 * 1024 * 8 / 240_000 * 1500 / 1460
    assert elapsed < 40
    assert "netcond: edge:" in result.stderr


def test_http_keepalive_range_and_304_through_the_proxy(proxy_factory):
    proxy = proxy_factory("none")
    result = curl(proxy, "-o", "/dev/null", "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n",
                  "http://origin.netcond.test/bytes/1KB", "http://origin.netcond.test/bytes/2KB")
    assert result.stdout.decode().split("\n")[:2] == ["200 1", "200 0"]
    ranged = curl(proxy, "-r", "100-199", "http://origin.netcond.test/bytes/1KB")
    assert ranged.stdout == origin_bytes(1024)[100:200]
    etag = curl(proxy, "-I", "http://origin.netcond.test/bytes/1KB").stdout.decode()
    tag = [line.split(":", 1)[1].strip() for line in etag.splitlines() if line.lower().startswith("etag")][0]
    again = curl(proxy, "-o", "/dev/null", "-w", "%{http_code}", "-H", f"If-None-Match: {tag}",
                 "http://origin.netcond.test/bytes/1KB")
    assert again.stdout == b"304"


def test_large_download_with_wget_and_python_clients(proxy_factory):
    proxy = proxy_factory("lte")
    expected = hashlib.sha256(origin_bytes(3 * 1024 * 1024, seed=9)).hexdigest()
    url = "http://origin.netcond.test/bytes/3MB?seed=9"
    env = dict(os.environ, http_proxy=proxy.url, https_proxy=proxy.url)
    wget = subprocess.run(["wget", "-q", "-O", "-", url], capture_output=True, env=env, timeout=120)
    assert hashlib.sha256(wget.stdout).hexdigest() == expected
    script = (
        "import hashlib, requests, httpx\n"
        f"r = requests.get('{url}', timeout=60)\n"
        "print(hashlib.sha256(r.content).hexdigest())\n"
        f"h = httpx.get('{url}', timeout=60)\n"
        "print(hashlib.sha256(h.content).hexdigest())\n"
    )
    python = subprocess.run(["python3", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert python.stdout.split() == [expected, expected], python.stderr


def test_chunked_upload_is_forwarded(proxy_factory):
    proxy = proxy_factory("3g")
    # The origin answers POST to /bytes with 405 after reading the body; the body must get through intact
    # (the exchange completes and the connection stays usable).
    body = os.urandom(50_000)
    result = subprocess.run(
        ["curl", "-sS", "-x", proxy.url, "-H", "Transfer-Encoding: chunked", "--data-binary", "@-",
         "-o", "/dev/null", "-w", "%{http_code}", "http://origin.netcond.test/"],
        input=body, capture_output=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() in ("200", "404", "405")


def test_connect_tunnel_and_socks5_reach_the_origin(proxy_factory):
    proxy = proxy_factory("dsl")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(b"CONNECT origin.netcond.test:80 HTTP/1.1\r\nHost: origin.netcond.test:80\r\n\r\n")
        head = s.recv(1024)
        assert head.startswith(b"HTTP/1.1 200")
        s.sendall(b"GET /bytes/100 HTTP/1.1\r\nHost: origin.netcond.test\r\nConnection: close\r\n\r\n")
        data = read_to_eof(s)
        assert data.split(b"\r\n\r\n", 1)[1] == origin_bytes(100)
    socks = subprocess.run(
        ["curl", "-sS", "--socks5-hostname", f"127.0.0.1:{proxy.port}", "http://origin.netcond.test/bytes/5000"],
        capture_output=True, timeout=60,
    )
    assert socks.stdout == origin_bytes(5000), socks.stderr


def test_unreachable_upstreams_a_reset_for_a_refusal_and_502_for_a_name(proxy_factory):
    proxy = proxy_factory("none")
    port = closed_port()
    # A refusal is a transport failure: the client's connection is reset, with no answer of
    # netcond's own (curl exit 56), over plain HTTP and CONNECT alike.
    refused = curl(proxy, "-w", "%{http_code}", f"http://127.0.0.1:{port}/")
    assert refused.returncode == 56 and refused.stdout == b"000", refused
    tunnel = curl(proxy, "-p", "-o", "/dev/null", f"http://127.0.0.1:{port}/")
    assert tunnel.returncode == 56 and b"502" not in tunnel.stderr
    unknown = curl(proxy, "-w", "\\n%{http_code}", "http://no-such-host.invalid/")
    body, code = unknown.stdout.decode().rsplit("\n", 1)
    assert code == "502" and "cannot resolve host 'no-such-host.invalid'" in body
    socks = subprocess.run(
        ["curl", "-sS", "--socks5-hostname", f"127.0.0.1:{proxy.port}", "http://no-such-host.invalid/"],
        capture_output=True, timeout=30,
    )
    assert socks.returncode != 0
    assert b"unreachable" in socks.stderr.lower() or b"socks" in socks.stderr.lower()


def test_malformed_request_gets_400_and_the_proxy_keeps_serving(proxy_factory):
    proxy = proxy_factory("none")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(b"THIS IS NOT HTTP\r\n\x00\x01\r\n\r\n")
        assert s.recv(1024).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(b"GET /no-absolute-url HTTP/1.1\r\n\r\n")
        assert s.recv(1024).startswith(b"HTTP/1.1 400")
    ok = curl(proxy, "http://origin.netcond.test/bytes/10")
    assert ok.stdout == origin_bytes(10)


@pytest.mark.parametrize("profile", ["none", "lossy"])
def test_forward_echo_is_byte_identical_with_half_close(proxy_factory, tmp, profile):
    server = EchoServer()
    try:
        if profile == "lossy":
            profile = write_profile(tmp, "lossy", "link:\n  bandwidth: 20Mbit\n  latency: 5ms\n  jitter: 3ms\n"
                                    "  loss: 5%\n")
        proxy = proxy_factory(profile, ["--forward", f"127.0.0.1:0=127.0.0.1:{server.port}"])
        forward_port = proxy.forward_ports[0]
        payload = os.urandom(2 * 1024 * 1024)
        received = bytearray()
        with socket.create_connection(("127.0.0.1", forward_port), timeout=60) as s:
            def reader():
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        return
                    received.extend(chunk)
            t = threading.Thread(target=reader)
            t.start()
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            t.join(timeout=90)
        assert bytes(received) == payload
    finally:
        server.close()


def test_latency_is_never_early_and_not_much_late(proxy_factory, tmp):
    profile = write_profile(tmp, "rtt", "link:\n  latency: 100ms\n")
    server = EchoServer()
    try:
        forward_port = proxy_factory(profile, ["--forward", f"127.0.0.1:0=127.0.0.1:{server.port}"]).forward_ports[0]
        with socket.create_connection(("127.0.0.1", forward_port), timeout=10) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            samples = []
            for _ in range(10):
                started = time.monotonic()
                s.sendall(b"x" * 100)
                got = b""
                while len(got) < 100:
                    got += s.recv(100 - len(got))
                samples.append(time.monotonic() - started)
        # The first exchange also waits for the emulated handshake (one more round trip).
        assert min(samples) >= 0.200
        assert sorted(samples)[len(samples) // 2] < 0.200 * 3
    finally:
        server.close()


def test_offline_connects_never_complete(proxy_factory):
    proxy = proxy_factory("offline")
    result = curl(proxy, "--max-time", "2", "-o", "/dev/null", "-w", "%{http_code}", "http://origin.netcond.test/")
    assert result.returncode == 28  # curl: operation timed out


def test_100_continue_is_passed_on(proxy_factory, tmp):
    # curl sends a large body only after the server's 100 Continue (or its own 1 s timeout): the
    # proxy must pass the interim response on, or every upload waits a second.
    proxy = proxy_factory("none")
    body = os.path.join(tmp, "body.bin")
    with open(body, "wb") as f:
        f.write(os.urandom(2 * 1024 * 1024))
    result = subprocess.run(["curl", "-sS", "-v", "-x", proxy.url, "-o", "/dev/null", "-w", "%{http_code}",
                             "-H", "Expect: 100-continue", "--expect100-timeout", "30", "--data-binary", f"@{body}",
                             "http://origin.netcond.test/status/200"], capture_output=True, timeout=60)
    assert b"< HTTP/1.1 100 Continue" in result.stderr, result.stderr[-2000:]
    # The origin read the whole body, then answered (it takes no POST at /status: 405).
    assert result.returncode == 0 and result.stdout == b"405", result.stdout


def raw_server(listener, answer, connections):
    """Serves `connections` connections on `listener` in a daemon thread, one request head each,
    answering with the bytes `answer(request)` gives, then closing; returns the thread."""
    def serve():
        for _ in range(connections):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                conn.sendall(answer(request))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_eof_delimited_response_and_head_through_the_proxy(proxy_factory):
    """A server that ends its body by closing (no Content-Length) and a HEAD request."""
    body = os.urandom(100_000)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def answer(request):
        if request.startswith(b"HEAD"):
            return b"HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n"
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body

    thread = raw_server(listener, answer, connections=2)
    try:
        proxy = proxy_factory("3g")
        got = curl(proxy, f"http://127.0.0.1:{port}/stream")
        assert got.returncode == 0, got.stderr
        assert got.stdout == body
        head = curl(proxy, "-I", f"http://127.0.0.1:{port}/head")
        assert head.returncode == 0, head.stderr
        assert b"12345" in head.stdout
    finally:
        listener.close()


def test_connection_setup_costs_one_round_trip_and_a_request_another(proxy_factory, tmp):
    """CONNECT's 200 comes after the emulated handshake (one RTT); a plain GET needs two RTTs."""
    profile = write_profile(tmp, "rtt400", "link:\n  latency: 200ms\n")
    proxy = proxy_factory(profile)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        started = time.monotonic()
        s.sendall(b"CONNECT origin.netcond.test:80 HTTP/1.1\r\nHost: origin.netcond.test:80\r\n\r\n")
        assert s.recv(1024).startswith(b"HTTP/1.1 200")
        handshake = time.monotonic() - started
        started = time.monotonic()
        s.sendall(b"GET /bytes/10 HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n")
        response = b""
        while not response.endswith(origin_bytes(10)):
            chunk = s.recv(4096)
            assert chunk
            response += chunk
        exchange = time.monotonic() - started
    assert 0.400 <= handshake < 0.400 * 3
    assert 0.400 <= exchange < 0.400 * 3
    result = curl(proxy, "-o", "/dev/null", "-w", "%{time_total}", "http://origin.netcond.test/bytes/10")
    assert 0.800 <= float(result.stdout) < 0.800 * 3


def test_bytes_sent_with_the_connect_head_go_through_at_once(proxy_factory):
    # A client that sends its request straight after CONNECT, in the same segment, gets its answer
    # without writing again.
    proxy = proxy_factory("none")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
        s.sendall(b"CONNECT origin.netcond.test:80 HTTP/1.1\r\nHost: origin.netcond.test:80\r\n\r\n"
                  b"GET /bytes/10 HTTP/1.1\r\nHost: origin.netcond.test\r\nConnection: close\r\n\r\n")
        answer = read_to_eof(s)
    assert answer.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert answer.endswith(origin_bytes(10))


def test_connections_that_end_before_a_protocol_leave_nothing_open(proxy_factory):
    # Port checks, health probes, a SOCKS5 greeting cut short, a CONNECT whose client leaves: each
    # is closed, and the proxy holds as many descriptors afterwards as before. The count is taken
    # after a first round of each kind, so that what the process opens once, on first use, and
    # keeps is not mistaken for a leak (3 descriptors more, seen once in a full suite run): a leak
    # grows with the 2,000 connections, a one-time start does not.
    proxy = proxy_factory("lte")

    def connect(count):
        for index in range(count):
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
                if index % 4 == 1:
                    s.sendall(b"\x05")
                elif index % 4 == 2:
                    s.sendall(b"CONNECT origin.netcond.test:80 HTTP/1.1\r\n\r\nearly")
                elif index % 4 == 3:
                    s.sendall(b"GET http://origin.netcond.test/bytes/1 HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n")

    connect(40)
    before = settled_descriptors(proxy.process.pid)
    connect(2000)
    assert_descriptors_return(proxy.process.pid, before, seconds=30)


def exchange(port, payload, half_close=False):
    """Sends `payload`, optionally shuts down the sending side, and reads until the proxy closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        return read_to_eof(s)


@pytest.mark.parametrize("payload", [
    b"GET http://x/ HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    b"FOO BAR\r\n\r\n",
    b"GET / HTTP/2.0\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
])
def test_a_malformed_request_gets_one_400_and_the_connection_ends(proxy_factory, payload):
    proxy = proxy_factory("lte")
    answer = exchange(proxy.port, payload)  # read_to_eof: fails by time-out if the proxy never closes
    assert answer.startswith(b"HTTP/1.1 400 ") and answer.count(b"HTTP/1.1 400 Bad Request") == 1, answer
    assert b"malformed request" in answer


def test_a_malformed_request_behind_a_whole_one_gets_its_400_after_that_answer(proxy_factory):
    """A whole request then a malformed one, sent before the server connection is made (an LTE
    round trip): the whole one is answered, then the one 400, then a close (never a reset), and the
    run's events show the answer delivered, not a client that left."""
    proxy = proxy_factory("lte")
    payload = (b"GET http://origin.netcond.test/bytes/5 HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n"
               b"FOO BAR\r\n\r\n")
    answer = exchange(proxy.port, payload)
    first, _, second = answer.partition(b"HTTP/1.1 400 Bad Request")
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(origin_bytes(5)), answer
    assert b"malformed request" in second and answer.count(b"HTTP/1.1 4") == 1, answer
    events = json.loads(proxy.ctl("events", "--json").stdout)["events"]
    delivered = [e for e in events if e["kind"] == "delivered"]
    assert len(delivered) == 1 and delivered[0]["bytes"] > 5, events
    assert {e["kind"] for e in events} <= {"link", "delivered"}, events


def test_pipelined_requests_then_a_half_close_get_every_answer(proxy_factory):
    proxy = proxy_factory("lte")
    requests = b"".join(b"GET http://origin.netcond.test/bytes/%d HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n" % n
                        for n in (1, 2, 3))
    answer = exchange(proxy.port, requests, half_close=True)
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 3, answer
    assert answer.endswith(origin_bytes(3))


@pytest.mark.parametrize("request_bytes, reason", [
    # A backend reading the body as chunked would run a second request the proxy never saw.
    (b"POST http://origin.netcond.test/api/x HTTP/1.0\r\nHost: origin.netcond.test\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n", b"HTTP/1.0 request with Transfer-Encoding"),
    (b"GET http://origin.netcond.test/bytes/1 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"more than one Host header"),
    (b"CONNECT 127.0.0.1:+80 HTTP/1.1\r\n\r\n", b"CONNECT needs host:port"),
    (b"GET http://127.0.0.1:1:1/ HTTP/1.1\r\nHost: x\r\n\r\n", b"bad host or port '127.0.0.1:1:1'"),
])
def test_requests_with_untrustworthy_framing_or_targets_are_refused(proxy_factory, request_bytes, reason):
    proxy = proxy_factory("none")
    answer = exchange(proxy.port, request_bytes)
    assert answer.startswith(b"HTTP/1.1 400 ") and reason in answer, answer
    assert answer.count(b"HTTP/1.1 ") == 1


@pytest.mark.parametrize("spelling", ["[::ffff:127.0.0.1]", "127.0.0.1"])
def test_a_request_to_the_proxy_itself_under_another_spelling_is_refused_not_looped(proxy_factory, spelling):
    proxy = proxy_factory("none")
    before = settled_descriptors(proxy.process.pid)
    answer = exchange(proxy.port, f"GET http://{spelling}:{proxy.port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 400 ") and b"the proxy itself" in answer, answer
    tunnel = exchange(proxy.port, f"CONNECT {spelling}:{proxy.port} HTTP/1.1\r\n\r\n".encode())
    assert tunnel.startswith(b"HTTP/1.1 400 ") and b"the proxy itself" in tunnel, tunnel
    assert_descriptors_return(proxy.process.pid, before)


def socks5_connect(port, ipv6_bytes, target_port):
    """A SOCKS5 CONNECT to an IPv6 address; returns the reply code."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"\x05\x01\x00")
        assert s.recv(2) == b"\x05\x00"
        s.sendall(b"\x05\x01\x00\x04" + ipv6_bytes + target_port.to_bytes(2, "big"))
        reply = s.recv(64)
        return reply[1] if len(reply) > 1 else None


def test_a_socks5_connection_to_the_proxy_itself_is_refused_not_looped(proxy_factory):
    proxy = proxy_factory("lte")
    before = settled_descriptors(proxy.process.pid)
    mapped = socket.inet_pton(socket.AF_INET6, "::ffff:127.0.0.1")
    assert socks5_connect(proxy.port, mapped, proxy.port) == 2  # connection not allowed by ruleset
    assert_descriptors_return(proxy.process.pid, before)
    assert curl(proxy, "http://origin.netcond.test/bytes/10").stdout == origin_bytes(10)


def test_a_forward_to_its_own_port_is_refused_before_anything_runs():
    port = free_port()
    for target in (f"127.0.0.1:{port}", f"localhost:{port}"):
        result = run(["run", "none", "--forward", f"127.0.0.1:{port}={target}", "--", "true"], timeout=30)
        assert result.returncode == 2, result.stderr
        assert "sends its port to itself" in result.stderr, result.stderr


def test_a_forward_to_a_refused_port_resets_the_client():
    target = closed_port()
    client = (
        "import socket, sys\n"
        "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
        "s.sendall(b'hello')\n"
        "try:\n"
        "    data = s.recv(10)\n"
        "    print('closed' if data == b'' else 'data')\n"
        "except ConnectionResetError:\n"
        "    print('reset')\n"
    )
    result, _ = run_listening(lambda port: ["run", "lte", "--seed", "1", "--quiet", "--forward",
                                            f"127.0.0.1:{port}=127.0.0.1:{target}", "--", sys.executable, "-c", client,
                                            str(port)], timeout=60)
    assert result.stdout.strip() == "reset", result.stdout + result.stderr


def test_malformed_requests_fuzzed_each_get_at_most_one_answer_and_leave_no_descriptor(proxy_factory):
    # A bounded, seeded fuzz: valid requests with bytes flipped, cut, or spliced with noise. Each
    # connection gets at most one answer and is closed; afterwards the descriptor count is back.
    proxy = proxy_factory("none")
    before = settled_descriptors(proxy.process.pid)
    rng = random.Random(20261125)
    seeds = [b"GET http://origin.netcond.test/bytes/5 HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n",
             b"POST http://origin.netcond.test/api/x HTTP/1.1\r\nHost: origin.netcond.test\r\nContent-Length: 3\r\n\r\nabc",
             b"CONNECT origin.netcond.test:80 HTTP/1.1\r\nHost: origin.netcond.test\r\n\r\n"]
    for _ in range(150):
        payload = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(payload))
            kind = rng.randrange(3)
            if kind == 0:
                payload[at] = rng.randrange(256)
            elif kind == 1:
                payload[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            else:
                del payload[at:at + rng.randint(1, 6)]
        answer = exchange(proxy.port, bytes(payload), half_close=True)
        assert answer.count(b"HTTP/1.1 400 ") <= 1, (bytes(payload), answer)
    assert_descriptors_return(proxy.process.pid, before, seconds=15)
    assert curl(proxy, "http://origin.netcond.test/bytes/10").stdout == origin_bytes(10)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to run the proxy as another user")
def test_the_proxy_serves_when_run_by_an_ordinary_user():
    # TCP_NODELAY is a TCP option: set at the socket level it was SO_DEBUG, which only root may
    # set, and every proxied connection of an ordinary user was reset.
    binary = os.path.abspath(NETCOND)
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]  # execs: signals reach netcond
    copy = None
    if subprocess.run(as_nobody + ["test", "-x", binary]).returncode != 0:
        # The build is in a folder nobody cannot enter (a clone in a 0700 home): a copy of the
        # binary where nobody can reach it, removed after.
        copy = tempfile.mkdtemp(prefix="netcond-as-nobody-")
        os.chmod(copy, 0o755)
        binary = shutil.copy2(binary, os.path.join(copy, "netcond"))
    proxy = subprocess.Popen(as_nobody + [binary, "proxy", "none", "--listen", "127.0.0.1:0", "--no-control"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = listening_port(proxy)
        assert wait_until(lambda: subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/"]).returncode == 0)
        got = subprocess.run(["curl", "-sS", "-x", f"http://127.0.0.1:{port}", "http://origin.netcond.test/bytes/1000"],
                             capture_output=True, timeout=30)
        assert got.returncode == 0 and got.stdout == origin_bytes(1000), got.stderr
    finally:
        stop_process(proxy, signal.SIGINT, timeout=10)
        if copy:
            shutil.rmtree(copy, ignore_errors=True)


def test_a_server_that_switches_protocols_gets_a_byte_pipe(proxy_factory):
    # A WebSocket-style upgrade over the plain-HTTP proxy path: after the server's 101, bytes flow
    # both ways unchanged (an echo here), as they would without the proxy.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def serve():
        conn, _ = server.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello ")
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                conn.sendall(chunk)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    proxy = proxy_factory("lte")
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(f"GET http://127.0.0.1:{port}/chat HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                      "Upgrade: echo\r\nConnection: Upgrade\r\n\r\n".encode())
            data = b""
            while not data.endswith(b"hello "):
                chunk = s.recv(4096)
                assert chunk, data
                data += chunk
            assert data.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
            s.sendall(b"ping \x00\xff")
            echoed = b""
            while len(echoed) < 7:
                chunk = s.recv(4096)
                assert chunk, echoed
                echoed += chunk
            assert echoed == b"ping \x00\xff"
    finally:
        server.close()
        thread.join(timeout=10)


@pytest.mark.skipif(not shutil.which("prlimit"), reason="needs prlimit")
def test_out_of_descriptors_is_said_and_the_proxy_recovers():
    proxy = subprocess.Popen(["prlimit", "--nofile=64:64", NETCOND, "proxy", "none", "--listen", "127.0.0.1:0",
                              "--no-control"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held = []
    said = []  # netcond's stderr, line by line, as it comes
    reader = threading.Thread(target=lambda: said.extend(iter(proxy.stderr.readline, "")), daemon=True)
    try:
        port = listening_port(proxy)
        reader.start()
        message = f"cannot accept connections on 127.0.0.1:{port}: out of file descriptors (this process's limit of 64)"
        assert wait_until(lambda: subprocess.run(["curl", "-s", "-o", "/dev/null", f"http://127.0.0.1:{port}/"]).returncode == 0)
        for _ in range(80):  # more than the proxy can hold: the rest wait in the backlog
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        # Held until netcond has met the limit (and said so), however slow the machine.
        assert wait_until(lambda: any(message in line for line in said), seconds=20), said
        for s in held:
            s.close()
        got = subprocess.run(["curl", "-sS", "--max-time", "20", "-x", f"http://127.0.0.1:{port}",
                              "http://origin.netcond.test/bytes/5"], capture_output=True, timeout=30)
        assert got.returncode == 0 and got.stdout == origin_bytes(5), got.stderr
    finally:
        for s in held:
            s.close()
        stop_process(proxy, timeout=10)
        if reader.ident is not None:
            reader.join(timeout=10)


def test_a_response_the_server_cuts_short_by_closing_is_a_cut_not_a_malformed_one(proxy_factory):
    """A server that closes in the middle of its body (a crash, a cut_after) sent HTTP: the client
    sees the body end short, as without netcond (curl exit 18), and netcond notes nothing malformed."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    thread = raw_server(listener, lambda request: b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10,
                        connections=1)
    try:
        proxy = proxy_factory("none")
        got = curl(proxy, "-i", f"http://127.0.0.1:{port}/x")
        assert got.returncode == 18, (got.returncode, got.stdout, got.stderr)
        assert got.stdout.startswith(b"HTTP/1.1 200 OK") and got.stdout.endswith(b"x" * 10), got.stdout
        events = json.loads(proxy.ctl("events", "--json").stdout)["events"]
        assert not [e for e in events if e["kind"] == "malformed"], events
    finally:
        listener.close()
        thread.join(5)
    _, _, err = proxy.stop()
    assert "is not HTTP netcond can read" not in err, err


@pytest.mark.parametrize("answer, reason", [
    (b"garbage that is no status line\r\n\r\n", "no HTTP/1.x status line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "not HTTP/1.1's"),
    (b"<html>an HTTP/0.9 answer: a body with no head</html>", "an HTTP/0.9 answer"),
])
def test_a_response_that_is_not_http_gets_a_502_saying_so_and_an_event(proxy_factory, answer, reason):
    """A server whose response the proxy cannot read as HTTP: the client gets a 502 from netcond
    that says so (as a forward proxy answers), never a bare close, and the run's events say it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    thread = raw_server(listener, lambda request: answer, connections=1)
    try:
        proxy = proxy_factory("none")
        got = curl(proxy, "-i", f"http://127.0.0.1:{port}/x")
        assert got.returncode == 0, got.stderr
        assert got.stdout.startswith(b"HTTP/1.1 502"), got.stdout
        assert f"the response of 127.0.0.1:{port} is not HTTP netcond can read".encode() in got.stdout, got.stdout
        assert reason.encode() in got.stdout
        events = json.loads(proxy.ctl("events", "--json").stdout)["events"]
        assert [e["kind"] for e in events if e["kind"] == "malformed"] == ["malformed"], events
    finally:
        listener.close()
        thread.join(5)
