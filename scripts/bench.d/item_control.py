"""Bench item 8: control-API work must not hold up traffic."""
import json
import socket
import statistics
import threading
import time

from benchlib import Netcond, pct, recv_exact


def big_profile_body(faults=1000):
    """A control-API body of about 120 KB: a profile with the most faults allowed (1,000)."""
    lines = ["name: big", "extends: none", "faults:"]
    for i in range(faults):
        lines.append(f"  - {{name: fault-number-{i:04d}, match: {{path: /api/items/{i:04d}/details/and/more/*}}, "
                     "status: 503, retry_after: 2s, first: 3}")
    return json.dumps({"yaml": "\n".join(lines) + "\n"}).encode()


def item_control_stall(h, t, srv):
    """Control-API work must not hold up traffic: round trips through a forward (1 byte every 2 ms)
    while a 120 KB profile is posted to the control API again and again (decoded off the proxy's
    event loop; only the change itself runs on it). Judged on the worst round trip, against the
    worst of the same stream with no posts."""
    import urllib.request
    nc = Netcond(h, "none", [srv.echo], seed=8, name="control-stall")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    body = big_profile_body()
    try:
        def stream(seconds):
            rtts = []
            end = time.monotonic() + seconds
            with socket.create_connection(("127.0.0.1", nc.forwards[0]), timeout=10) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                while time.monotonic() < end:
                    started = time.monotonic()
                    sock.sendall(b"x")
                    recv_exact(sock, 1)
                    rtts.append(time.monotonic() - started)
                    time.sleep(0.002)
            return rtts

        quiet = stream(4)
        posts, failures = [], []
        stop = threading.Event()

        def poster():
            while not stop.is_set():
                req = urllib.request.Request(nc.control_url + "/profile", data=body,
                                             headers={"Content-Type": "application/json"})
                started = time.monotonic()
                try:
                    with opener.open(req, timeout=30) as r:
                        r.read()
                    posts.append(time.monotonic() - started)
                except Exception as e:
                    failures.append(str(e))
                    return

        thread = threading.Thread(target=poster, daemon=True)
        thread.start()
        busy = stream(6)
        stop.set()
        thread.join(timeout=35)
        if failures:
            raise RuntimeError(f"posting the profile failed: {failures[0]}")
        worst_quiet, worst_busy = max(quiet) * 1e3, max(busy) * 1e3
        added = worst_busy - worst_quiet
        t.add("8. control API work and traffic: worst round trip while posting a 120 KB profile",
              f"{worst_busy:.1f} ms with {len(posts)} posts ({statistics.mean(posts) * 1e3:.0f} ms each) vs "
              f"{worst_quiet:.1f} ms without; p99 {pct(busy, 99) * 1e3:.2f} vs {pct(quiet, 99) * 1e3:.2f} ms",
              "worst <= 50 ms more than without posts", "PASS" if added <= 50 else "FAIL")
    finally:
        nc.stop()
    t.notes.append("Control stall (8): `netcond proxy none` (control API on), one forward to an echo server; "
                   "a 1-byte round trip every 2 ms for 4 s alone, then for 6 s while one thread posts a profile "
                   "with 1,000 faults (about 120 KB) to POST /profile back to back.")
