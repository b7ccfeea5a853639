"""`netcond toxiproxy` under connect/close churn: what a suite's clients can do to the relay. Each
test checks its own netcond's descriptors (/proc/PID), never the host's."""
import socket
import struct
import threading

import pytest

from conftest import assert_descriptors_return, settled_descriptors

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
            churn([(address(shaped), styles), (address(held), styles)], 2000)
            assert_descriptors_return(proc.pid, before, slack=0, seconds=5)
            assert proc.poll() is None
    finally:
        echo.close()
