"""The child processes the harness starts by re-invoking bench.py (which dispatches here): the test
servers (`bench.py serve`), the timer probe (`bench.py timers`), 9f's servers (`bench.py tcpserve`)
and item 9's clients (`bench.py client ...`). 9e's UDP echo server (`bench.py udpecho`) is in
item_packet_udp.py, with the datagram format it shares with its client."""
import argparse
import json
import os
import selectors
import socket
import sys
import threading
import time
import urllib.request

from benchlib import download, pingpong
from item_packet_udp import udp_client


# ----------------------------------------------------------------------------------------------
# test servers (run as `bench.py serve`, a separate process so they do not share our GIL)


def serve(bind="127.0.0.1"):
    """Echo server (selectors, one thread) and bulk source (a thread per connection that writes
    as fast as it can until the peer goes away), on `bind` (9b's mahimahi column: 0.0.0.0 inside a
    namespace of the bench's own). Prints {"echo": port, "source": port}."""
    echo = socket.socket()
    echo.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    echo.bind((bind, 0))
    echo.listen(4096)
    echo.setblocking(False)
    source = socket.socket()
    source.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    source.bind((bind, 0))
    source.listen(512)
    print(json.dumps({"echo": echo.getsockname()[1], "source": source.getsockname()[1]}), flush=True)

    chunk = bytes(range(256)) * 256  # 64 KiB

    def blast(conn):
        try:
            conn.settimeout(120)
            while True:
                conn.sendall(chunk)
        except OSError:
            pass
        finally:
            conn.close()

    def accept_sources():
        while True:
            try:
                conn, _ = source.accept()
            except OSError:
                return
            threading.Thread(target=blast, args=(conn,), daemon=True).start()

    threading.Thread(target=accept_sources, daemon=True).start()

    # Parent death: stop when stdin closes (the harness holds a pipe to it).
    sel = selectors.DefaultSelector()
    sel.register(echo, selectors.EVENT_READ, "listen")
    sel.register(sys.stdin, selectors.EVENT_READ, "stdin")
    pending = {}
    while True:
        for key, mask in sel.select(timeout=1.0):
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    return
                continue
            if key.data == "listen":
                for _ in range(256):
                    try:
                        conn, _ = echo.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        break
                    conn.setblocking(False)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    pending[conn] = b""
                    sel.register(conn, selectors.EVENT_READ, "conn")
                continue
            conn = key.fileobj
            try:
                if mask & selectors.EVENT_READ:
                    data = conn.recv(65536)
                    if not data:
                        raise ConnectionResetError
                    pending[conn] += data
                if pending[conn]:
                    sent = conn.send(pending[conn])
                    pending[conn] = pending[conn][sent:]
                sel.modify(conn, selectors.EVENT_READ | (selectors.EVENT_WRITE if pending[conn] else 0), "conn")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                sel.unregister(conn)
                pending.pop(conn, None)
                conn.close()


def timers(hop):
    """`bench.py timers`: sleeps `hop` twice in a row (two delayed hops, like one emulated round
    trip) until stdin closes, then prints the oversleeps in ms as JSON. Run next to a latency
    measurement, it shows the timer floor of this machine at that very moment."""
    import select
    over = []
    while True:
        t0 = time.perf_counter()
        r1, _, _ = select.select([sys.stdin], [], [], hop)
        r2, _, _ = select.select([sys.stdin], [], [], hop) if not r1 else (r1, None, None)
        if r1 or r2:
            break
        over.append((time.perf_counter() - t0 - 2 * hop) * 1000)
    print(json.dumps(over), flush=True)


# 9f's workloads. The same code runs on both sides of the comparison: on this host's loopback
# (`bench.py tcpserve` outside netcond, `bench.py client ...` as the command of `netcond run --engine
# packet`) and in tcp_reference.py's two namespaces (the kernel's TCP through its Python emulator).


def tcp_serve(bind, port, cc, size):
    """`bench.py tcpserve`: 9f's servers. Three listeners on `bind`, ports `port`, +1, +2 (0: free
    ones): fresh (reads one request byte, sends `size` bytes, closes: 5d's 1 MB server), source (writes
    until the peer goes, as `serve`'s) and echo (TCP_NODELAY). Every socket sends with congestion
    control `cc` (TCP_CONGESTION on the listener, and again on each accepted socket). Prints {"fresh": P,
    "source": P, "echo": P}; exits when stdin closes (or on SIGTERM)."""
    payload = bytes(range(256)) * (size // 256 + 1)
    chunk = bytes(range(256)) * 256
    algo = cc.encode()

    def listener(p):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, algo)
        s.bind((bind, p))
        s.listen(64)
        return s

    def fresh(conn):
        conn.settimeout(120)
        if conn.recv(1):
            conn.sendall(payload[:size])

    def source(conn):
        conn.settimeout(120)
        while True:
            conn.sendall(chunk)

    def echo(conn):
        conn.settimeout(300)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(65536)
            if not data:
                return
            conn.sendall(data)

    def handle(fn, conn):
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, algo)
            fn(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def accept(sock, fn):
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(fn, conn), daemon=True).start()

    socks = {}
    for i, (key, fn) in enumerate((("fresh", fresh), ("source", source), ("echo", echo))):
        socks[key] = listener(port + i if port else 0)
        threading.Thread(target=accept, args=(socks[key], fn), daemon=True).start()
    print(json.dumps({key: sock.getsockname()[1] for key, sock in socks.items()}), flush=True)
    while os.read(sys.stdin.fileno(), 4096):
        pass


def source_address(base, k):
    """The k-th local address from `base` (None: let the kernel choose). 9f's clients on this host
    use a new 127.87.x.y address per connection, so the server's TCP finds no metrics (ssthresh, RTT)
    cached from an earlier connection, as in tcp_reference.py's namespaces (tcp_no_metrics_save=1)."""
    if not base:
        return None
    import ipaddress
    return str(ipaddress.ip_address(base) + k)


def fresh_client(host, port, size, runs, timeout, pause, src_base):
    """`bench.py client fresh`: `runs` downloads of `size` bytes from tcpserve's fresh port, one
    after another, each a new connection timed from connect() to the last byte (5d's measure).
    Prints "SECONDS BYTES" per download (tcp_reference.py's format), then one JSON object: the times
    of the complete ones, and the errors."""
    times, errors = [], []
    for i in range(runs):
        start = time.monotonic()
        try:
            c = socket.create_connection((host, port), timeout=timeout,
                                         source_address=(source_address(src_base, i), 0) if src_base else None)
            try:
                c.sendall(b"g")
                got = 0
                while got < size:
                    if time.monotonic() - start > timeout:
                        raise TimeoutError(f"{got} of {size} bytes in {timeout:.0f} s")
                    chunk = c.recv(262144)
                    if not chunk:
                        break
                    got += len(chunk)
            finally:
                c.close()
            elapsed = time.monotonic() - start
            print("%.4f %d" % (elapsed, got), flush=True)
            if got == size:
                times.append(elapsed)
            else:
                errors.append(f"run {i}: {got} of {size} bytes")
        except Exception as e:
            errors.append(f"run {i}: {type(e).__name__}: {e}")
            print(f"error {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        time.sleep(pause)
    print(json.dumps({"times": times, "errors": errors}), flush=True)


def bloat_client(host, echo_port, source_port, src_base, idle=20, loaded=40, total=22.0, skip=1.0, wait=5.0):
    """`bench.py client bloat`: 5c's measure without the proxy: `idle` ping-pongs of 100 bytes with
    the echo server (after one warm-up), then a bulk download from the source for `total` s and,
    from `wait` s after it began, `loaded` more on a new echo connection (no warm-up), as 5c does
    through the proxy. Returns {"idle": [s], "loaded": [s], "bulk_bps": payload B/s from `skip` s}."""
    idle_rtts, _ = pingpong(echo_port, idle, deadline=time.monotonic() + 30, host=host,
                            src=source_address(src_base, 0))
    res = {}
    th = threading.Thread(target=download, args=(source_port, total, skip, res, "bulk"),
                          kwargs={"host": host, "src": source_address(src_base, 1)}, daemon=True)
    th.start()
    time.sleep(wait)
    loaded_rtts, _ = pingpong(echo_port, loaded, warmup=0, deadline=time.monotonic() + total, host=host,
                              src=source_address(src_base, 2))
    th.join(total + 10)
    bulk = res.get("bulk")
    return {"idle": idle_rtts, "loaded": loaded_rtts, "bulk_bps": bulk if isinstance(bulk, (int, float)) else None,
            "bulk_error": None if isinstance(bulk, (int, float)) else str(bulk)}


def netcond_lateness():
    """Under `netcond run`: how late netcond's link sent what was due (its control API's
    `timer_late_us_p50_p99_max`: 50th, 99th percentile, maximum in µs), else None."""
    url = os.environ.get("NETCOND_CONTROL")
    if not url:
        return None
    try:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(url.rstrip("/") + "/status", timeout=10) as answer:
            return json.load(answer).get("timer_late_us_p50_p99_max")
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"


def client(argv):
    """`bench.py client pingpong|download|udp|fresh|bloat ...`: the clients of item 9, run as the
    command of `netcond run --engine packet` (or directly, or in tcp_reference.py's client namespace);
    print one JSON object on stdout (fresh: a line per download first)."""
    ap = argparse.ArgumentParser(prog="bench.py client")
    ap.add_argument("what", choices=["pingpong", "download", "udp", "fresh", "bloat"])
    ap.add_argument("--port", type=int, required=True, help="bloat: the echo port")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--src-base", default=None, help="9f: local address of the first connection, +1 for each next")
    ap.add_argument("--source-port", type=int, default=0, help="bloat: the bulk source's port")
    ap.add_argument("--bytes", type=int, default=1 << 20, help="fresh: bytes per download")
    ap.add_argument("--runs", type=int, default=1, help="fresh: downloads, one after another")
    ap.add_argument("--timeout", type=float, default=120.0, help="fresh: seconds per download")
    ap.add_argument("--pause", type=float, default=0.2, help="fresh: seconds between downloads")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--gap", type=float, default=0.0, help="pingpong: seconds idle before each exchange")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--deadline", type=float, default=60.0, help="seconds for the whole exchange")
    ap.add_argument("--total", type=float, default=10.0)
    ap.add_argument("--skip", type=float, default=1.0)
    ap.add_argument("--rate", type=float, default=1000.0, help="udp: datagrams per second")
    ap.add_argument("--seconds", type=float, default=30.0, help="udp: how long to send")
    ap.add_argument("--drain", type=float, default=1.5, help="udp: seconds to wait for echoes after the last send")
    a = ap.parse_args(argv)
    try:
        if a.what == "pingpong":
            stats = {}
            rtts, first = pingpong(a.port, a.n, size=a.size, warmup=a.warmup,
                                   deadline=time.monotonic() + a.deadline, stats=stats, gap=a.gap, host=a.host)
            print(json.dumps({"rtts": rtts, "first": first, "client_retrans": stats.get("retrans"),
                              "netcond_late_us": netcond_lateness()}), flush=True)
        elif a.what == "udp":
            print(json.dumps(udp_client(a.port, a.rate, a.seconds, a.drain, size=a.size)), flush=True)
        elif a.what == "fresh":
            fresh_client(a.host, a.port, a.bytes, a.runs, a.timeout, a.pause, a.src_base)
        elif a.what == "bloat":
            print(json.dumps(bloat_client(a.host, a.port, a.source_port, a.src_base, total=a.total, skip=a.skip)),
                  flush=True)
        else:
            res = {}
            download(a.port, a.total, a.skip, res, "a", host=a.host, src=source_address(a.src_base, 0))
            if isinstance(res.get("a"), Exception):
                raise res["a"]
            print(json.dumps({"bps": res["a"]}), flush=True)
    except Exception as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        sys.exit(1)
