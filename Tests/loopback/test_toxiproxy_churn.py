"""`netcond toxiproxy` under connect/close churn, and proxies that loop back into netcond: what a
suite's clients can do to the relay and what a user's typo can do to its upstream. Each test checks
its own netcond's descriptors and CPU time (/proc/PID), never the host's."""
import os
import socket
import struct
import threading
import time

import pytest
import requests

from conftest import assert_descriptors_return, descriptors, settled_descriptors, stop_process, wait_until

pytest.importorskip("toxiproxy", reason="toxiproxy-python is not installed (scripts/test installs it)")
from test_toxiproxy import address, running_api  # noqa: E402  (after the skip: it imports toxiproxy)


class Echo:
    """An echo server on 127.0.0.1 with a backlog deep enough for 100 connections at once (each
    connection a thread, ended by its peer's close or 30 s of silence)."""

    def __init__(self):
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _serve(conn):
        with conn:
            conn.settimeout(30)
            try:
                while data := conn.recv(65536):
                    conn.sendall(data)
            except OSError:
                return

    def close(self):
        self.stop.set()
        self.sock.close()


def churn(targets, total, at_once=100):
    """`total` connections, `at_once` open at a time, spread over `targets` ((host, port), close
    styles): each connects and, in turn, closes at once (FIN), sends a few bytes and closes,
    resets (SO_LINGER 0), or sends, half-closes and closes."""
    made = 0
    while made < total:
        batch = []
        for i in range(min(at_once, total - made)):
            target, styles = targets[(made + i) % len(targets)]
            try:
                batch.append((socket.create_connection(target, timeout=10), styles[(made + i) // len(targets) % len(styles)]))
            except OSError as error:
                raise AssertionError(f"connection {made + i} to {target}: {error}")
        for sock, style in batch:
            try:
                if style == "send":
                    sock.sendall(b"hello")
                elif style == "reset":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                elif style == "half":
                    sock.sendall(b"bye")
                    sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # netcond closed it first (a toxic's end): the close below is all that is left
            sock.close()
        made += len(batch)


def test_connect_close_churn_through_toxics_leaves_no_descriptor():
    """2,000 connections, 100 at a time, through two proxies with toxics (latency, bandwidth,
    slicer; a timeout), each client closing at once (before the upstream answers, often before
    netcond's connection to it is made), after a few bytes, with a reset or after a half-close:
    netcond's descriptors are back where they were within 5 s of the last close. (A client that
    closed without sending a byte before the upstream connection was made stayed in CLOSE-WAIT for
    good: its end closed the server's side from the connect's completion, which NIO reports with
    no channelInactive, and so the client's side was never closed.)"""
    echo = Echo()
    try:
        with running_api("--seed", "5") as (client, _, _, proc):
            shaped = client.create(upstream=f"127.0.0.1:{echo.port}", name="shaped")
            shaped.add_toxic(type="latency", name="lat", attributes={"latency": 20, "jitter": 5})
            shaped.add_toxic(type="latency", stream="upstream", name="up", attributes={"latency": 10})
            shaped.add_toxic(type="bandwidth", stream="upstream", name="bw", attributes={"rate": 100})
            shaped.add_toxic(type="slicer", name="sl", attributes={"average_size": 2, "size_variation": 1, "delay": 100})
            held = client.create(upstream=f"127.0.0.1:{echo.port}", name="held")
            held.add_toxic(type="timeout", name="to", attributes={"timeout": 0})
            held.add_toxic(type="latency", stream="upstream", name="up", attributes={"latency": 10})
            styles = ("close", "send", "reset", "half")
            before = settled_descriptors(proc.pid)
            # NETCOND_TOXI_CHURN=10000: the audit's count, measured by hand (about 15 s).
            churn([(address(shaped), styles), (address(held), styles)], int(os.environ.get("NETCOND_TOXI_CHURN", "2000")))
            assert_descriptors_return(proc.pid, before, slack=0, seconds=5)
            assert proc.poll() is None
    finally:
        echo.close()


def cpu_seconds(pid):
    """The CPU time (user + system) a process has used, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def set_upstream(port, name, upstream):
    r = requests.post(f"http://127.0.0.1:{port}/proxies/{name}", json={"upstream": upstream}, timeout=10)
    assert r.status_code == 200 and r.json()["upstream"] == upstream, r.text


def loop_lines(stderr):
    return [line for line in stderr.splitlines() if "loop" in line]


@pytest.mark.parametrize("spelling", ["127.0.0.1", "localhost", "0.0.0.0", "[::ffff:127.0.0.1]", "127.1"])
def test_a_proxy_pointed_at_itself_closes_the_connection_once_and_stops(spelling):
    """Its upstream is its own listen address (the port the API reports), however it is written
    (`127.1` is a name getaddrinfo gives as 127.0.0.1): the client's one connection is closed,
    netcond says so in one line and does not go round (it took a core: 700 connects a second, the
    loop found on each after its connect, the connection that connect made relayed on again)."""
    with running_api() as (client, port, _, proc):
        itself = client.create(upstream="127.0.0.1:1", name="itself")
        set_upstream(port, "itself", f"{spelling}:{address(itself)[1]}")
        loop_is_closed(proc, [address(itself)])
        stop_process(proc)
        lines = loop_lines(proc.stderr.read())
        assert len(lines) == 1 and "itself" in lines[0], lines


def test_two_proxies_pointed_at_each_other_close_the_connection_once_and_stop():
    """a to b by address, b to a by name: a client of a sees its connection closed, one line names
    a and b, and nothing goes round."""
    with running_api() as (client, port, _, proc):
        a = client.create(upstream="127.0.0.1:1", name="a")
        b = client.create(upstream=f"localhost:{address(a)[1]}", name="b")
        set_upstream(port, "a", f"127.0.0.1:{address(b)[1]}")
        loop_is_closed(proc, [address(a)])
        stop_process(proc)
        lines = loop_lines(proc.stderr.read())
        assert len(lines) == 1 and " a" in lines[0] and " b" in lines[0], lines


def loop_is_closed(proc, targets):
    """A client connects once to each target: its connection is closed, and for 3 s after netcond
    uses under 1 s of CPU (a loop took a core), and its descriptors come back."""
    before = settled_descriptors(proc.pid)
    started = cpu_seconds(proc.pid)
    for target in targets:
        with socket.create_connection(target, timeout=10) as sock:
            sock.settimeout(10)
            try:
                assert sock.recv(100) == b""
            except ConnectionResetError:
                pass  # closed either way
    time.sleep(3)
    used = cpu_seconds(proc.pid) - started
    assert used < 1.0, f"{used:.2f} s of CPU in 3 s: still going round"
    assert wait_until(lambda: len(descriptors(proc.pid)) <= len(before), seconds=10), descriptors(proc.pid)
