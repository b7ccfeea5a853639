"""Bench item 13: Toxiproxy side by side.

Toxiproxy's own server (v2.12.0; TOXIPROXY_SERVER, else .build-toxiproxy/toxiproxy-server in the
repository, which scripts/build-toxiproxy makes, else toxiproxy-server on PATH) and `netcond
toxiproxy` run at the same time, each on a free 127.0.0.1 port, in front of one upstream (a Python
server in this process, on a free port). For each toxic, the same proxy and toxics are made
through each one's REST API (plain urllib), and a raw TCP client measures what it sees through
each, one server after the other: first bytes, rates, bytes, how and when the connection closes
(FIN or RST), and what the upstream saw. A row passes when netcond gives what Toxiproxy gives:
the same close kind, the same bytes, times within 10 % + 10 ms of Toxiproxy's, rates within 10 %,
shares (toxicity) both within 0.3-0.7.

The upstream speaks one line, then acts on it:
  "SEND n CLOSE tag\\n"  sends n bytes of a fixed pattern, then half-closes (FIN), reads to the end
  "SEND n HOLD tag\\n"   sends n bytes, then reads (counting) until the other side closes
  "ECHO tag\\n"          echoes every byte that follows
and records per tag the bytes it received (the line included) and how the proxy closed on it."""
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import threading
import time
import urllib.error
import urllib.request

from benchlib import free_port, pct

NAME = "13. Toxiproxy side by side"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ITEM_LIMIT = 150.0        # seconds for the whole item; a case that would start after it is SKIP
PATTERN = bytes((i * 7 + 3) % 251 for i in range(1 << 20))
TIME_TARGET = "within 10 % + 10 ms of Toxiproxy's"


def toxiproxy_server():
    """(path or None, why not)."""
    env = os.environ.get("TOXIPROXY_SERVER")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env, ""
        return None, f"TOXIPROXY_SERVER={env} is not an executable file"
    built = os.path.join(ROOT, ".build-toxiproxy", "toxiproxy-server")
    if os.access(built, os.X_OK):
        return built, ""
    found = shutil.which("toxiproxy-server")
    if found:
        return found, ""
    return None, ("no toxiproxy-server (build one with `scripts/build-toxiproxy SOURCE`, SOURCE a git clone "
                  "or source tree of github.com/Shopify/toxiproxy, or set TOXIPROXY_SERVER=/path/to/toxiproxy-server)")


# ----------------------------------------------------------------------------------------------
# the upstream


class Upstream:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.records = {}
        self.conns = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.conns.add(c)
            threading.Thread(target=self._handle, args=(c,), daemon=True).start()

    def _handle(self, c):
        rec = {"bytes": 0, "saw": "open", "saw_t": None, "accepted": time.monotonic()}
        c.settimeout(20)  # bounds every handler
        try:
            buf = b""
            while b"\n" not in buf and len(buf) < 65536:
                d = c.recv(65536)
                if not d:
                    rec["saw"], rec["saw_t"] = "FIN", time.monotonic()
                    return
                buf += d
            line, rest = buf.split(b"\n", 1)
            words = line.decode(errors="replace").split()
            if words:
                with self.lock:
                    self.records[words[-1]] = rec
            rec["bytes"] = len(buf)
            echo = words[:1] == ["ECHO"]
            if words[:1] == ["SEND"] and len(words) >= 3:
                c.sendall(PATTERN[:int(words[1])])
                if words[2] == "CLOSE":
                    c.shutdown(socket.SHUT_WR)
            elif echo and rest:
                c.sendall(rest)
            while True:
                d = c.recv(65536)
                if not d:
                    rec["saw"], rec["saw_t"] = "FIN", time.monotonic()
                    return
                rec["bytes"] += len(d)
                if echo:
                    c.sendall(d)
        except ConnectionResetError:
            rec["saw"], rec["saw_t"] = "RST", time.monotonic()
        except (socket.timeout, OSError) as e:
            rec["saw"], rec["saw_t"] = f"error {type(e).__name__}", time.monotonic()
        finally:
            with self.lock:
                self.conns.discard(c)
            c.close()

    def record(self, tag, settle=1.5):
        """The upstream's record of `tag`, once it saw the connection end (at most `settle` s)."""
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            with self.lock:
                rec = self.records.get(tag)
            if rec is not None and rec["saw"] != "open":
                return dict(rec)
            time.sleep(0.02)
        with self.lock:
            rec = self.records.get(tag)
        return dict(rec) if rec else None

    def close(self):
        self.stopping.set()
        self.sock.close()
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(2)


# ----------------------------------------------------------------------------------------------
# the two servers


class Api:
    def __init__(self, kind, proc, port):
        self.kind, self.proc, self.url = kind, proc, f"http://127.0.0.1:{port}"
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def req(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request(self.url + path, data=data, method=method,
                                   headers={"Content-Type": "application/json", "User-Agent": "netcond-bench"})
        try:
            with self.opener.open(r, timeout=10) as resp:
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    @contextlib.contextmanager
    def proxy(self, name, upstream_port, toxics=()):
        """A proxy on a free port (listen 127.0.0.1:0) with `toxics` [(type, stream, toxicity, attributes)];
        yields its port; deleted after."""
        self.req("DELETE", f"/proxies/{name}")
        st, body = self.req("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0",
                                                  "upstream": f"127.0.0.1:{upstream_port}", "enabled": True})
        if st not in (200, 201):
            raise RuntimeError(f"{self.kind}: POST /proxies answered {st}: {body[:200]}")
        port = int(json.loads(body)["listen"].rsplit(":", 1)[1])
        try:
            for i, (typ, stream, toxicity, attributes) in enumerate(toxics):
                self.add_toxic(name, f"t{i}", typ, stream, toxicity, attributes)
            yield port
        finally:
            self.req("DELETE", f"/proxies/{name}")

    def add_toxic(self, proxy, name, typ, stream, toxicity, attributes):
        st, body = self.req("POST", f"/proxies/{proxy}/toxics", {"name": name, "type": typ, "stream": stream,
                                                                "toxicity": toxicity, "attributes": attributes})
        if st != 200:
            raise RuntimeError(f"{self.kind}: adding the {typ} toxic answered {st}: {body[:200]}")


def wait_api(proc, port, timeout=10.0):
    deadline = time.monotonic() + timeout
    api = Api("", proc, port)
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if api.req("GET", "/version")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def read_log(proc, ext):
    try:
        with open(proc.log + ext, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def start_toxiproxy(h, path):
    last = ""
    for attempt in range(3):  # a free port can be taken between the probe and the bind
        port = free_port()
        proc = h.spawn([path, "-host", "127.0.0.1", "-port", str(port), "-seed", "1"], f"toxiproxy-13-{attempt}")
        if wait_api(proc, port):
            return Api("Toxiproxy", proc, port)
        last = (read_log(proc, ".err") + read_log(proc, ".out")).strip()[-300:]
        h.stop(proc)
    raise RuntimeError(f"toxiproxy-server did not start ({path}): {last}")


def start_netcond(h):
    argv = [h.binary, "toxiproxy", "--listen", "127.0.0.1:0", "--seed", "1"]
    proc = h.spawn(argv, "netcond-toxiproxy-13")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and proc.poll() is None:
        m = re.search(r"Toxiproxy API on http://127\.0\.0\.1:(\d+)", read_log(proc, ".out") + read_log(proc, ".err"))
        if m and wait_api(proc, int(m.group(1)), 5):
            api = Api("netcond", proc, int(m.group(1)))
            api.display = " ".join(argv)
            return api
        time.sleep(0.05)
    err = read_log(proc, ".err").strip()[-300:]
    h.stop(proc)
    raise RuntimeError(f"`{' '.join(argv)}` did not start (exit {proc.poll()}): {err}")


# ----------------------------------------------------------------------------------------------
# the client


TAGS = iter(range(1, 1 << 30))


def tag():
    return f"c{next(TAGS)}"


def watch(port, send=b"", window=3.0, expect=None, until_first=False, during=None):
    """Connects, sends `send`, reads until the connection closes, `expect` bytes came, the first
    byte came (`until_first`) or `window` s passed. Times in ms from the connect's start.
    `during(t0)`, when given, runs in a thread started after the send."""
    r = {"first": None, "last": None, "first_n": 0, "bytes": 0, "data": bytearray(), "close": "open", "close_t": None}
    t0 = time.monotonic()
    r["t0"] = t0
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=3)
    except OSError as e:
        r["close"] = f"connect {type(e).__name__}"
        return r
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if send:
            s.sendall(send)
        if during:
            threading.Thread(target=during, args=(t0,), daemon=True).start()
        end = t0 + window
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            s.settimeout(min(left, 0.5))
            try:
                d = s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                r["close"], r["close_t"] = "RST", (time.monotonic() - t0) * 1000
                break
            now = (time.monotonic() - t0) * 1000
            if not d:
                r["close"], r["close_t"] = "FIN", now
                break
            if r["first"] is None:
                r["first"], r["first_n"] = now, len(d)
            r["last"] = now
            r["bytes"] += len(d)
            r["data"] += d
            if until_first or (expect is not None and r["bytes"] >= expect):
                break
    finally:
        s.close()
    return r


def close_text(r):
    if r["close"] in ("FIN", "RST"):
        return f"{r['close']} at {r['close_t']:.0f} ms"
    return r["close"]


def time_ok(ref, value):
    if ref is None or value is None:
        return ref is None and value is None
    return abs(value - ref) <= 0.1 * ref + 10


def ms(v):
    return "-" if v is None else f"{v:.0f} ms"


def verdict(ok):
    return "PASS" if ok else "FAIL"


# ----------------------------------------------------------------------------------------------
# the cases: each measures one server (returns a dict) and is judged by a function adding rows


LAT = [("latency", "downstream", 1.0, {"latency": 100}), ("latency", "upstream", 1.0, {"latency": 100})]


def m_latency(api, up):
    out = {"first": []}
    with api.proxy("b13-latency", up.port, LAT) as port:
        for _ in range(10):
            r = watch(port, f"SEND 100 CLOSE {tag()}\n".encode(), window=3, until_first=True)
            if r["first"] is not None:
                out["first"].append(r["first"])
        rtts = []
        s = socket.create_connection(("127.0.0.1", port), timeout=3)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(f"ECHO {tag()}\n".encode())
            for i in range(10):
                t1 = time.monotonic()
                s.sendall(b"0123456789")
                got = 0
                while got < 10:
                    d = s.recv(100)
                    if not d:
                        raise ConnectionError(f"{api.kind}: echo closed after {i} exchanges")
                    got += len(d)
                rtts.append((time.monotonic() - t1) * 1000)
        finally:
            s.close()
        out["rtt"] = rtts
    return out


def j_latency(t, a, b):
    for key, what, n in (("first", "first reply, p50 of 10 new connections", 10),
                         ("rtt", "per exchange on one connection, p50 of 10", 10)):
        x = pct(a[key], 50) if len(a[key]) == n else None
        y = pct(b[key], 50) if len(b[key]) == n else None
        t.add(f"{NAME}: latency 100 ms down + 100 up, {what}",
              f"Toxiproxy {ms(x)} · netcond {ms(y)}" + ("" if len(b[key]) == n else f" ({len(b[key])} of {n} answered)"),
              TIME_TARGET, verdict(x is not None and time_ok(x, y)))


def m_bandwidth(api, up):
    size = 400_000
    with api.proxy("b13-bandwidth", up.port, [("bandwidth", "downstream", 1.0, {"rate": 200})]) as port:
        r = watch(port, f"SEND {size} CLOSE {tag()}\n".encode(), window=6)
    rate = None
    if r["first"] is not None and r["last"] and r["last"] > r["first"]:
        rate = (r["bytes"] - r["first_n"]) / (r["last"] - r["first"])  # bytes/ms = KB/s
    return {"rate": rate, "first": r["first"], "bytes": r["bytes"], "size": size}


def j_bandwidth(t, a, b):
    ok = a["rate"] is not None and b["rate"] is not None and abs(b["rate"] - a["rate"]) <= 0.1 * a["rate"] \
        and a["bytes"] == b["bytes"]
    rate = lambda v: "-" if v["rate"] is None else f"{v['rate']:.1f} KB/s ({v['bytes']} B)"
    t.add(f"{NAME}: bandwidth 200 KB/s, download rate after the first read ({a['size']:,} B)",
          f"Toxiproxy {rate(a)} · netcond {rate(b)}", "bytes equal, rate within 10 % of Toxiproxy's", verdict(ok))
    t.add(f"{NAME}: bandwidth 200 KB/s, first byte", f"Toxiproxy {ms(a['first'])} · netcond {ms(b['first'])}",
          TIME_TARGET, verdict(time_ok(a["first"], b["first"])))


def m_timeout(api, up):
    with api.proxy("b13-timeout", up.port, [("timeout", "downstream", 1.0, {"timeout": 1000})]) as port:
        return watch(port, f"SEND 1000 HOLD {tag()}\n".encode(), window=3)


def j_close(label, target_extra=""):
    def judge(t, a, b):
        ok = a["close"] == b["close"] and a["bytes"] == b["bytes"] and time_ok(a["close_t"], b["close_t"])
        t.add(f"{NAME}: {label}", f"Toxiproxy {a['bytes']} B, {close_text(a)} · netcond {b['bytes']} B, {close_text(b)}",
              f"same close kind, bytes equal, time of close {TIME_TARGET}{target_extra}", verdict(ok))
    return judge


def m_reset_peer(api, up):
    name = tag()
    with api.proxy("b13-reset", up.port, [("reset_peer", "downstream", 1.0, {"timeout": 500})]) as port:
        r = watch(port, f"SEND 1000 HOLD {name}\n".encode(), window=3)
        rec = up.record(name)
    r["up"] = rec
    return r


def j_reset_peer(t, a, b):
    j_close("reset_peer 500 ms, what the client sees")(t, a, b)

    def saw(r):
        u = r["up"]
        if not u:
            return "no connection", None
        return u["saw"], None if u["saw_t"] is None else (u["saw_t"] - r["t0"]) * 1000

    (ka, ta), (kb, tb) = saw(a), saw(b)
    t.add(f"{NAME}: reset_peer 500 ms, what the upstream saw",
          f"Toxiproxy {ka}{'' if ta is None else f' at {ta:.0f} ms'} · netcond {kb}{'' if tb is None else f' at {tb:.0f} ms'}",
          f"same close kind, time {TIME_TARGET}", verdict(ka == kb and time_ok(ta, tb)))


def m_limit_down(api, up):
    with api.proxy("b13-limit-down", up.port, [("limit_data", "downstream", 1.0, {"bytes": 5000})]) as port:
        return watch(port, f"SEND 20000 HOLD {tag()}\n".encode(), window=3)


def j_limit_down(t, a, b):
    ok = a["close"] == b["close"] and a["bytes"] == b["bytes"]
    t.add(f"{NAME}: limit_data 5000 B downstream (20,000 sent), what the client gets",
          f"Toxiproxy {a['bytes']} B, {close_text(a)} · netcond {b['bytes']} B, {close_text(b)}",
          "bytes equal, same close kind", verdict(ok))


def m_limit_up(api, up):
    name = tag()
    line = f"SEND 0 HOLD {name}\n".encode()
    with api.proxy("b13-limit-up", up.port, [("limit_data", "upstream", 1.0, {"bytes": 1000})]) as port:
        r = watch(port, line + PATTERN[:5000 - len(line)], window=3)  # 5,000 bytes in one write
        r["up"] = up.record(name)
    return r


def j_limit_up(t, a, b):
    ua = a["up"]["bytes"] if a["up"] else None
    ub = b["up"]["bytes"] if b["up"] else None
    ok = ua is not None and ua == ub and a["close"] == b["close"]
    t.add(f"{NAME}: limit_data 1000 B upstream, client sends 5,000 B at once: bytes the upstream got",
          f"Toxiproxy {ua} B, client {close_text(a)} · netcond {ub} B, client {close_text(b)}",
          "bytes equal, same close kind", verdict(ok))


def m_slow_close(api, up):
    with api.proxy("b13-slow-close", up.port, [("slow_close", "downstream", 1.0, {"delay": 1000})]) as port:
        r = watch(port, f"SEND 1000 CLOSE {tag()}\n".encode(), window=4)
    r["after"] = r["close_t"] - r["last"] if r["close_t"] is not None and r["last"] is not None else None
    return r


def j_slow_close(t, a, b):
    ok = a["close"] == b["close"] and a["bytes"] == b["bytes"] and time_ok(a["after"], b["after"])
    t.add(f"{NAME}: slow_close 1000 ms, close after the last byte",
          f"Toxiproxy {a['bytes']} B, {a['close']} {ms(a['after'])} after · netcond {b['bytes']} B, {b['close']} {ms(b['after'])} after",
          f"same close kind, bytes equal, time {TIME_TARGET}", verdict(ok))


def m_slicer(api, up):
    slicer = ("slicer", "downstream", 1.0, {"average_size": 100, "size_variation": 50, "delay": 10000})
    with api.proxy("b13-slicer", up.port, [slicer]) as port:
        r = watch(port, f"SEND 5000 CLOSE {tag()}\n".encode(), window=5)
    r["intact"] = bytes(r["data"]) == PATTERN[:5000]
    return r


def j_slicer(t, a, b):
    t.add(f"{NAME}: slicer 100±50 B, 10 ms (5,000 B): time to the last byte",
          f"Toxiproxy {ms(a['last'])} · netcond {ms(b['last'])}", TIME_TARGET, verdict(time_ok(a["last"], b["last"])))
    text = lambda r: f"{r['bytes']} B{', every byte as sent' if r['intact'] else ', NOT as sent'}, {r['close']}"
    t.add(f"{NAME}: slicer, what arrives", f"Toxiproxy {text(a)} · netcond {text(b)}",
          "5,000 B as sent, same close kind", verdict(a["intact"] and b["intact"] and a["close"] == b["close"]))


def m_toxicity(api, up):
    delayed = n = 0
    with api.proxy("b13-toxicity", up.port, [("latency", "downstream", 0.5, {"latency": 100})]) as port:
        for _ in range(40):
            r = watch(port, f"SEND 100 CLOSE {tag()}\n".encode(), window=2, until_first=True)
            if r["first"] is not None:
                n += 1
                delayed += r["first"] >= 50
    return {"delayed": delayed, "n": n}


def j_toxicity(t, a, b):
    share = lambda r: r["delayed"] / r["n"] if r["n"] else None
    sa, sb = share(a), share(b)
    ok = a["n"] == b["n"] == 40 and all(0.3 <= s <= 0.7 for s in (sa, sb))
    t.add(f"{NAME}: toxicity 0.5 on latency 100 ms, share of 40 connections delayed",
          f"Toxiproxy {a['delayed']}/{a['n']} · netcond {b['delayed']}/{b['n']}", "both shares within 0.3-0.7", verdict(ok))


def m_closed_upstream(api, up):
    kinds = {}
    closed = free_port()  # nothing listens there
    with api.proxy("b13-closed", closed) as port:
        for _ in range(50):
            r = watch(port, b"", window=2)
            kinds[r["close"]] = kinds.get(r["close"], 0) + 1
    return kinds


def j_closed_upstream(t, a, b):
    text = lambda k: ", ".join(f"{v} {k}" for k, v in sorted(k.items()))
    t.add(f"{NAME}: upstream port closed, 50 connections: how they close",
          f"Toxiproxy {text(a)} · netcond {text(b)}", "same close kinds and counts", verdict(a == b))


def m_remove_timeout(api, up):
    res = {}
    with api.proxy("b13-remove", up.port, [("timeout", "downstream", 1.0, {"timeout": 0})]) as port:
        def remove(t0):
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
            sent = (time.monotonic() - t0) * 1000
            res["status"] = api.req("DELETE", "/proxies/b13-remove/toxics/t0")[0]
            res["at"] = sent  # the close can come before the answer

        r = watch(port, f"SEND 1000 HOLD {tag()}\n".encode(), window=3, during=remove)
        deadline = time.monotonic() + 2
        while "at" not in res and time.monotonic() < deadline:
            time.sleep(0.02)
    r["removed_at"], r["status"] = res.get("at"), res.get("status")
    return r


def j_remove_timeout(t, a, b):
    def text(r):
        if r["status"] != 204 and r["status"] != 200:
            return f"DELETE answered {r['status']}"
        if r["close"] in ("FIN", "RST") and r["removed_at"] is not None:
            return f"closed ({r['close']}) {r['close_t'] - r['removed_at']:.0f} ms after the DELETE was sent, {r['bytes']} B"
        return f"{r['close']} 2 s after the DELETE, {r['bytes']} B"
    ok = a["close"] == b["close"] and a["bytes"] == b["bytes"] and b["status"] in (200, 204)
    t.add(f"{NAME}: timeout (0) removed at 1 s while a connection is held",
          f"Toxiproxy {text(a)} · netcond {text(b)}", "same: closed or not, close kind, bytes", verdict(ok))


CASES = [
    ("latency", m_latency, j_latency),
    ("bandwidth", m_bandwidth, j_bandwidth),
    ("timeout", m_timeout, j_close("timeout 1000 ms (upstream sends 1,000 B and holds)")),
    ("reset_peer", m_reset_peer, j_reset_peer),
    ("limit_data down", m_limit_down, j_limit_down),
    ("limit_data up", m_limit_up, j_limit_up),
    ("slow_close", m_slow_close, j_slow_close),
    ("slicer", m_slicer, j_slicer),
    ("toxicity", m_toxicity, j_toxicity),
    ("closed upstream", m_closed_upstream, j_closed_upstream),
    ("remove timeout", m_remove_timeout, j_remove_timeout),
]


# ----------------------------------------------------------------------------------------------


def item_toxiproxy(h, t, log=None):
    say = log or (lambda text: None)
    path, why = toxiproxy_server()
    if not path:
        t.add(NAME, f"skipped: {why}", "-", "SKIP")
        return
    started = time.monotonic()
    up = tp = nc = None
    try:
        up = Upstream()
        tp = start_toxiproxy(h, path)
        nc = start_netcond(h)
        version = tp.req("GET", "/version")[1].strip()
        say(f"  Toxiproxy {path} ({version}) on {tp.url}; netcond on {nc.url}; upstream on 127.0.0.1:{up.port}")
        t.notes.append(f"13: Toxiproxy is {path} (`GET /version`: {version}), run as `-host 127.0.0.1 -port P -seed 1`; "
                       f"netcond as `{nc.display}`; each case measured through Toxiproxy, then through netcond.")
        for key, measure, judge in CASES:
            if time.monotonic() - started > ITEM_LIMIT or h.remaining() < 15:
                t.add(f"{NAME}: {key}", "skipped: the item's time limit", "-", "SKIP")
                continue
            try:
                results = [measure(api, up) for api in (tp, nc)]
                judge(t, *results)
            except Exception as e:
                t.error(f"{NAME}: {key}", e)
            for api in (tp, nc):
                if api.proc.poll() is not None:
                    raise RuntimeError(f"{api.kind} exited by itself (exit {api.proc.returncode}) during '{key}': "
                                       f"{read_log(api.proc, '.err').strip()[-300:]}")
    finally:
        if nc is not None:
            if nc.proc.poll() is not None:
                h.note(f"`{nc.display}` exited by itself (exit {nc.proc.returncode}): "
                       f"{read_log(nc.proc, '.err').strip()[-300:]!r}")
            else:
                rc, in_time = h.stop(nc.proc, sig=signal.SIGINT, wait=10)
                if not in_time:
                    h.note(f"`{nc.display}` did not exit within 10 s of SIGINT (killed)")
                elif rc != 0:
                    h.note(f"`{nc.display}` exited {rc} after SIGINT: {read_log(nc.proc, '.err').strip()[-300:]!r}")
        if tp is not None:
            h.stop(tp.proc)
        if up is not None:
            up.close()
        say(f"  13 took {time.monotonic() - started:.0f} s")
