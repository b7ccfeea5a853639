"""Bench item 17: 5,000 connections opened at once, through a forward with no conditions.

A client opens N connections (default 5,000; NETCOND_BENCH_STORM_N) as fast as it can (non-blocking
connects from one process) to a forward, and an upstream counts the connections it accepts; the time
measured runs from the client's first connect to the upstream's accepting the N-th: until every one
is through. The forwards, in the same run, interleaved over rounds (NETCOND_BENCH_STORM_ROUNDS,
default 5; the order turns each round), medians compared:

  - `netcond toxiproxy` with one proxy and no toxics (made through its REST API, as a suite makes it);
  - `netcond proxy none --forward 127.0.0.1:0=127.0.0.1:UPSTREAM`;
  - Toxiproxy's own server (item 13 says how it is found), one proxy, no toxics: the reference;
  - socat (`socat TCP-LISTEN:P,reuseaddr,fork,bind=127.0.0.1 TCP:127.0.0.1:UPSTREAM`, as a user
    runs it): the reference when there is no Toxiproxy (the row says so); beside Toxiproxy only
    with NETCOND_BENCH_STORM_SOCAT=1 (it forks a process per connection, and its listen queue of 5
    makes most connections wait out SYN retransmissions: tens of seconds a round).

Target: each netcond forward's median no more than Toxiproxy's. A second row: once all are through,
the upstream must hold every one open (a forward that closes an upstream it made, or leaves a client
unread, is caught here); after each round the client closes every connection and the upstream must
see every one closed before the next, and netcond's descriptors must come back.
The client and the upstream are this file run as a script (`client`, `upstream`), each a process of
its own with the file limit raised; they read commands on stdin and answer one JSON line each. The
client also reads each connection's TCP_INFO: connections whose SYN had to be sent again (the
forward's listen queue overflowed, and the client waited out a 1 s retransmission) are counted."""
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time

if __name__ != "__main__":
    from benchlib import Netcond, free_port, log, wait_listening
    from item_toxiproxy import start_netcond, start_toxiproxy, toxiproxy_server

NAME = "17. 5,000 connections at once"
SELF = os.path.abspath(__file__)
LIFETIME = 1800.0  # seconds a client or upstream process lives at most
WAIT = 40.0  # seconds from the first connect for every connection to be through


# ----------------------------------------------------------------------------------------------
# the two helper processes (run as scripts)


def raise_file_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Commands:
    """The command lines the item sends a helper process on its stdin, read as they come."""

    def __init__(self):
        self.buf = b""

    def read(self, fd):
        """The whole lines read so far, each as its words; None once stdin has closed."""
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        self.buf += chunk
        lines = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            lines.append(line.decode().split())
        return lines


def upstream_main():
    """Accepts every connection, keeps it open until its peer closes it; `expect N` starts a round:
    `{"all": N, "at": t}` once N more are accepted; `drain` answers once none is open (or after 30 s)."""
    raise_file_limit()
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(65535)  # the kernel takes somaxconn at most
    lsock.setblocking(False)
    ep = select.epoll()
    ep.register(lsock.fileno(), select.EPOLLIN)
    ep.register(sys.stdin.fileno(), select.EPOLLIN)
    say({"port": lsock.getsockname()[1]})
    conns, accepted, expect, drain_by, commands = {}, 0, None, None, Commands()
    end = time.monotonic() + LIFETIME
    while time.monotonic() < end:
        for fd, ev in ep.poll(0.2):
            if fd == lsock.fileno():
                while True:
                    try:
                        c, _ = lsock.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    c.setblocking(False)
                    conns[c.fileno()] = c
                    ep.register(c.fileno(), select.EPOLLIN | select.EPOLLRDHUP)
                    accepted += 1
                    if expect is not None and accepted == expect:
                        say({"all": accepted, "at": time.monotonic()})
                        expect = None
            elif fd == sys.stdin.fileno():
                lines = commands.read(fd)
                if lines is None:
                    return
                for words in lines:
                    if words[:1] == ["expect"]:
                        accepted, expect = 0, int(words[1])
                        say({"expecting": expect})
                    elif words[:1] == ["drain"]:
                        drain_by = time.monotonic() + 30
                    elif words[:1] == ["count"]:
                        say({"accepted": accepted, "open": len(conns)})
            else:
                c = conns.get(fd)
                try:
                    data = c.recv(65536) if c else b""
                except OSError:
                    data = b""
                if not data and c:
                    ep.unregister(fd)
                    del conns[fd]
                    c.close()
        if drain_by is not None and (not conns or time.monotonic() > drain_by):
            say({"drained": not conns, "open": len(conns), "accepted": accepted})
            drain_by = None


def client_main():
    """`open PORT N`: N non-blocking connects, then `{"t0", "connected", "errors", "syn_resent", "at"}`
    once each has connected or failed (or after 60 s); `close` closes them all."""
    raise_file_limit()
    ep = select.epoll()
    ep.register(sys.stdin.fileno(), select.EPOLLIN)
    socks, pending, commands = [], {}, Commands()
    result = None
    end = time.monotonic() + LIFETIME
    while time.monotonic() < end:
        for fd, ev in ep.poll(0.2):
            if fd == sys.stdin.fileno():
                lines = commands.read(fd)
                if lines is None:
                    return
                for words in lines:
                    if words[:1] == ["open"]:
                        port, n = int(words[1]), int(words[2])
                        t0 = time.monotonic()
                        for _ in range(n):
                            s = socket.socket()
                            s.setblocking(False)
                            s.connect_ex(("127.0.0.1", port))
                            socks.append(s)
                            pending[s.fileno()] = s
                            ep.register(s.fileno(), select.EPOLLOUT)
                        result = {"t0": t0, "issued": time.monotonic() - t0, "connected": 0, "errors": 0,
                                  "syn_resent": 0, "deadline": time.monotonic() + 60}
                    elif words[:1] == ["close"]:
                        for s in socks:
                            s.close()
                        say({"closed": len(socks)})
                        socks, pending = [], {}
            elif fd in pending:
                s = pending.pop(fd)
                ep.unregister(fd)
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    result["connected"] += 1
                    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
                    result["syn_resent"] += int.from_bytes(info[100:104], sys.byteorder) > 0
                else:
                    result["errors"] += 1
        if result is not None and (not pending or time.monotonic() > result["deadline"]):
            result["at"] = time.monotonic()
            result["unanswered"] = len(pending)
            say(result)
            result = None


# ----------------------------------------------------------------------------------------------
# the harness side


class Peer:
    """A helper process (client or upstream): one command line in, JSON lines out."""

    def __init__(self, h, role):
        self.h = h
        self.proc = h.spawn([sys.executable, SELF, role], f"storm-{role}", stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
        self.buf = b""

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def read(self, timeout, key):
        """The next JSON line holding `key` (others are skipped), or None after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                obj = json.loads(line.decode())
                if key in obj:
                    return obj
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                return None
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return None
                self.buf += chunk

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.h.stop(self.proc)


def one_round(client, upstream, port, n):
    """(seconds until the upstream had all n, the client's report, drained) through `port`."""
    upstream.send(f"expect {n}")
    if upstream.read(10, "expecting") is None:
        raise RuntimeError("the upstream did not answer")
    client.send(f"open {port} {n}")
    started = time.monotonic()
    # A client's connect completes before the forward accepts it (the kernel's listen queue), and
    # one the queue had no room for waits out the retransmissions of its SYN or SYN-ACK (1, 3, 7,
    # 15, 31 s): the upstream is given until WAIT s after the start.
    report = client.read(WAIT, "connected")
    done = upstream.read(max(1.0, WAIT - (time.monotonic() - started)), "all")
    if report is None:
        raise RuntimeError("the client did not report")
    # Every connection through is held open by the forward (none closed at once, none left behind).
    time.sleep(0.5)
    upstream.send("count")
    seen = upstream.read(5, "accepted") or {}
    report["upstream_open"], report["upstream_saw"] = seen.get("open"), seen.get("accepted")
    elapsed = None if done is None else done["at"] - report["t0"]
    client.send("close")
    client.read(20, "closed")
    upstream.send("drain")
    drained = upstream.read(40, "drained") or {"drained": False, "open": "?"}
    return elapsed, report, drained


def start_forwards(h, upstream_port, apis):
    """{label: (port, stop function, fd count function or None)}; `apis`: (label, Api) of the Toxiproxy APIs."""
    forwards = {}
    for label, api in apis:
        cm = api.proxy("b17-storm", upstream_port)
        port = cm.__enter__()
        pid = api.proc.pid if label.startswith("netcond") else None
        forwards[label] = (port, lambda cm=cm: cm.__exit__(None, None, None), pid)
    nc = Netcond(h, "none", [upstream_port], seed=1, name="storm-forward")
    forwards["netcond proxy none --forward"] = (nc.forwards[0], nc.stop, nc.pid)
    if apis and apis[-1][0] == "Toxiproxy" and not os.environ.get("NETCOND_BENCH_STORM_SOCAT"):
        return forwards
    port = free_port()
    socat = h.spawn(["socat", f"TCP-LISTEN:{port},reuseaddr,fork,bind=127.0.0.1", f"TCP:127.0.0.1:{upstream_port}"],
                    "storm-socat")
    if not wait_listening(port):
        raise RuntimeError("socat did not start")
    forwards["socat"] = (port, lambda: h.stop(socat), None)
    return forwards


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 6: "TIME_WAIT",
              7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING"}


def socket_states(pid):
    """What `pid`'s TCP sockets are, by state ("12 CLOSE_WAIT, 2 LISTEN"), for a leak's message."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return "?"
    counts = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if len(fields) > 9 and fields[9] in inodes:
                        state = TCP_STATES.get(int(fields[3], 16), fields[3])
                        counts[state] = counts.get(state, 0) + 1
        except OSError:
            pass
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no TCP sockets"


def median(values):
    v = sorted(values)
    return None if not v else v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def item_accept_storm(h, t):
    n = int(os.environ.get("NETCOND_BENCH_STORM_N", "5000"))
    rounds = int(os.environ.get("NETCOND_BENCH_STORM_ROUNDS", "5"))
    path, why = toxiproxy_server()
    client = upstream = None
    apis, forwards = [], {}
    try:
        upstream = Peer(h, "upstream")
        up = upstream.read(10, "port")
        if up is None:
            raise RuntimeError("the upstream did not start")
        client = Peer(h, "client")
        nc_api = start_netcond(h)
        apis.append(("netcond toxiproxy", nc_api))
        if path:
            apis.append(("Toxiproxy", start_toxiproxy(h, path)))
        forwards = start_forwards(h, up["port"], apis)
        samples = {label: [] for label in forwards}
        resent = {label: [] for label in forwards}
        baseline = {label: fd_count(f[2]) for label, f in forwards.items() if f[2]}
        leaks = []
        labels = list(forwards)
        for rnd in range(rounds):
            if h.remaining() < 30:
                t.notes.append(f"17: stopped after {rnd} rounds (time budget)")
                break
            order = labels[rnd % len(labels):] + labels[:rnd % len(labels)]
            for label in order:
                port, _, pid = forwards[label]
                elapsed, report, drained = one_round(client, upstream, port, n)
                text = f"{report.get('upstream_saw')} through in time" if elapsed is None else f"{elapsed:.2f} s"
                log(f"    round {rnd + 1} {label}: {text}; connected {report['connected']}, errors {report['errors']}, "
                    f"SYN resent on {report['syn_resent']}, connects issued in {report['issued']:.2f} s; "
                    f"drained {drained['drained']}")
                samples[label].append(elapsed)
                resent[label].append(report["syn_resent"])
                if elapsed is not None and report.get("upstream_open") != n:
                    leaks.append(f"{label} round {rnd + 1}: {report.get('upstream_open')} of the {n} upstream "
                                 "connections open before the client closed")
                if not drained["drained"]:
                    leaks.append(f"{label} round {rnd + 1}: {drained['open']} upstream connections still open 40 s "
                                 "after the client closed")
                time.sleep(0.5)
        judge(t, n, samples, resent, path, why)
        for label, before in baseline.items():
            # The upstream has seen every close; the client's sides close a moment later.
            after, settle = fd_count(forwards[label][2]), time.monotonic() + 15
            while after is not None and after > before + 16 and time.monotonic() < settle:
                time.sleep(0.2)
                after = fd_count(forwards[label][2])
            if after is not None and after > before + 16:
                leaks.append(f"{label}: {after} descriptors open 15 s after the rounds, {before} before "
                             f"(TCP: {socket_states(forwards[label][2])})")
        t.add(f"{NAME}: every connection held while open, and closed after each round (the upstream saw each "
              "close; descriptors back)", "; ".join(leaks) or "all", "all", "FAIL" if leaks else "PASS")
        t.notes.append(
            f"17: {n} connections from one client process (non-blocking connects) through each forward, "
            f"{rounds} interleaved rounds (the order turned each round); the time from the first connect to the "
            f"upstream accepting the {n}-th. Per round (s): "
            + "; ".join(f"{k}: " + ", ".join("-" if v is None else f"{v:.2f}" for v in vs) for k, vs in samples.items())
            + ". Connections whose SYN was sent again (listen queue full; 1 s each), per round: "
            + "; ".join(f"{k}: " + ", ".join(str(v) for v in vs) for k, vs in resent.items())
            + f". netcond as `{nc_api.display}` with one proxy and no toxics, and `netcond proxy none --listen "
            "127.0.0.1:0 --seed 1 --forward 127.0.0.1:0=127.0.0.1:UPSTREAM`; Toxiproxy with one proxy, no toxics; "
            f"socat `TCP-LISTEN:P,reuseaddr,fork,bind=127.0.0.1` (when run); somaxconn {read_somaxconn()}.")
    finally:
        for label, f in forwards.items():
            try:
                f[1]()
            except Exception as e:
                log(f"    stopping {label}: {e}")
        for _, api in apis:
            h.stop(api.proc, sig=signal.SIGINT, wait=10)
        for peer in (client, upstream):
            if peer:
                peer.close()


def read_somaxconn():
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return f.read().strip()
    except OSError:
        return "?"


def judge(t, n, samples, resent, path, why):
    med = {k: median([v for v in vs if v is not None]) if all(v is not None for v in vs) else None
           for k, vs in samples.items()}
    ref_label = "Toxiproxy" if path else "socat"
    ref = med.get(ref_label)
    fmt = lambda v: f"not all through in {WAIT:.0f} s" if v is None else f"{v:.2f} s"
    others = ", ".join(f"{k} {fmt(v)}" for k, v in med.items() if not k.startswith("netcond"))
    missing = "" if path else f" (Toxiproxy was not built: {why}; compared with socat)"
    for label in ("netcond toxiproxy", "netcond proxy none --forward"):
        v = med.get(label)
        ratio = f" = {v / ref:.2f} × {ref_label}" if v is not None and ref else ""
        # A reference that did not get all through in time (WAIT s) is slower than any that did.
        ok = v is not None and (ref is None or v <= ref) and samples.get(ref_label)
        t.add(f"{NAME}: `{label}`, until the upstream has accepted all {n:,} (median)",
              f"{fmt(v)}{ratio}; {others}; SYN resent (median per round) {median(resent[label]):g}{missing}",
              f"≤ {ref_label}'s time in the same run", "PASS" if ok else "FAIL")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    {"client": client_main, "upstream": upstream_main}[sys.argv[1]]()
