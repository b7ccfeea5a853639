"""Bench item 16: finding a connection's route stays cheap with many routes."""
import os
import socket
import time

from benchlib import Netcond, recv_exact


def routes_profile(h, name, routes, last_matches):
    """A profile whose link imposes nothing and whose `routes` are `routes` host routes matching
    nothing here, then (with `last_matches`) one address route taking 127.0.0.1: the connection
    meets every index before it finds its own."""
    lines = ["extends: none", "routes:"]
    for i in range(routes):
        lines.append(f'  - match: {{host: "host-{i:04d}.example.test", port: 443}}')
    if last_matches:
        lines.append("  - {name: local, match: {address: 127.0.0.1/32}}")
    path = os.path.join(h.tmp, f"{name}.yaml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def connections_per_second(port, seconds):
    """Connections opened one after another to a forward, each carrying one byte there and back."""
    count = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(b"x")
            recv_exact(sock, 1)
        count += 1
    return count / seconds


def item_routes(h, t, srv):
    """Proxy connections per second through a forward with 1 route and with 1,000 (the connection's
    own the last), alternated over three rounds of 5 s each; judged on the medians' ratio."""
    rates = {}
    for label, count in (("1 route", 0), ("1,001 routes", 1000)):
        profile = routes_profile(h, f"routes-{count}", count, last_matches=True)
        nc = Netcond(h, profile, [srv.echo], seed=16, name=f"routes-{count}")
        rates[label] = (nc, [])
    try:
        for _ in range(3):
            for label, (nc, found) in rates.items():
                found.append(connections_per_second(nc.forwards[0], 5))
    finally:
        for nc, _ in rates.values():
            nc.stop()
    few = sorted(rates["1 route"][1])[1]
    many = sorted(rates["1,001 routes"][1])[1]
    ratio = many / few
    t.add("16. routes: proxy connections per second, 1,001 routes (1,000 host routes, then the one taken) vs 1",
          f"{many:.0f} vs {few:.0f} per s ({ratio:.2f}x)", ">= 0.9x", "PASS" if ratio >= 0.9 else "FAIL")
    t.notes.append("Routes: connections opened one after another through a forward of `netcond proxy` to an echo "
                   "server, one byte there and back each; three alternating rounds of 5 s; medians. The profile's "
                   "link imposes nothing, so the model's per-connection work and the route lookup are what is "
                   "measured.")
