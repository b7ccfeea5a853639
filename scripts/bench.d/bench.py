#!/usr/bin/env python3
"""netcond benchmark: the measuring half of scripts/bench (which installs tools and builds first).

Usage (normally called by scripts/bench):
  bench.py run --binary PATH --tmp DIR --pidfile FILE --out bench-results.md --command "..."
  bench.py serve                       test servers (echo + bulk source) in their own process
  bench.py client pingpong|download|udp  item 9's clients (run as the command of `netcond run --engine
                                       packet`, or directly): --port P ...; print one JSON object
  bench.py udpecho --n N               9e's UDP echo server: prints {"port": P}, its counts when stdin closes

Every process this starts is put in its own process group, recorded in --pidfile (so the bash
trap can kill it even if this process is killed), and stopped in a finally block. Every socket has
a timeout and every loop a deadline. A failing item becomes ERROR/FAIL rows; the others still run.
"""
import argparse
import contextlib
import json
import math
import os
import re
import selectors
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import html_report  # noqa: E402  (item 10, a module of its own)
import engines  # noqa: E402  (item 11, a module of its own)

MSS, WIRE = 1460, 1500
PAYLOAD_SHARE = MSS / WIRE  # goodput share of a link rate with full segments

# ----------------------------------------------------------------------------------------------
# test servers (run as `bench.py serve`, a separate process so they do not share our GIL)


def serve():
    """Echo server (selectors, one thread) and bulk source (a thread per connection that writes
    as fast as it can until the peer goes away). Prints {"echo": port, "source": port}."""
    echo = socket.socket()
    echo.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    echo.bind(("127.0.0.1", 0))
    echo.listen(4096)
    echo.setblocking(False)
    source = socket.socket()
    source.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    source.bind(("127.0.0.1", 0))
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


# ----------------------------------------------------------------------------------------------
# process handling


class Harness:
    def __init__(self, args):
        self.binary = args.binary
        self.tmp = args.tmp
        self.pidfile = args.pidfile
        self.procs = []
        self.lock = threading.Lock()
        self.anomalies = []  # things that looked wrong in netcond itself
        self.netcond_count = 0
        self.started = time.monotonic()
        self.budget = args.budget
        os.makedirs(os.path.join(self.tmp, "logs"), exist_ok=True)

    def remaining(self):
        return self.budget - (time.monotonic() - self.started)

    def spawn(self, argv, name, stdin=subprocess.DEVNULL, stdout=None, stderr=None):
        log = os.path.join(self.tmp, "logs", name)
        out = stdout if stdout is not None else open(log + ".out", "wb")
        err = stderr if stderr is not None else open(log + ".err", "wb")
        proc = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, start_new_session=True)
        proc.log = log
        with self.lock:
            self.procs.append(proc)
            with open(self.pidfile, "a") as f:
                f.write(f"{proc.pid}\n")
        return proc

    def stop(self, proc, sig=signal.SIGTERM, wait=5.0):
        """Stops a process and its group; returns (exit code, stopped in time)."""
        in_time = True
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                in_time = False
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers in the group (socat children)
        except (ProcessLookupError, PermissionError):
            pass
        if proc.poll() is None:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        return proc.returncode, in_time

    def stop_all(self):
        with self.lock:
            procs = list(self.procs)
        for proc in procs:
            try:
                self.stop(proc, wait=2.0)
            except Exception:
                pass

    def note(self, text):
        with self.lock:
            if text not in self.anomalies:
                self.anomalies.append(text)
        log(f"  !! {text}")


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(port, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Servers:
    """The `serve` process."""

    def __init__(self, h, name="servers"):
        self.h = h
        self.proc = h.spawn([sys.executable, os.path.abspath(__file__), "serve"], name,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = b""
        deadline = time.monotonic() + 10
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            if sel.select(timeout=0.5):
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                line += chunk
        sel.close()
        ports = json.loads(line.decode())
        self.echo, self.source = ports["echo"], ports["source"]

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.h.stop(self.proc)


class Netcond:
    """One `netcond proxy` process listening on port 0, with forwards to `targets`."""

    def __init__(self, h, profile, targets=(), seed=1, name="netcond", extra=()):
        self.h = h
        h.netcond_count += 1
        self.name = f"{name}-{h.netcond_count}"
        self.argv = [h.binary, "proxy", profile, "--listen", "127.0.0.1:0", "--seed", str(seed), *extra]
        for t in targets:
            self.argv += ["--forward", f"127.0.0.1:0=127.0.0.1:{t}"]
        self.display = " ".join(self.argv)
        self.proc = h.spawn(self.argv, self.name)
        self.forwards = []
        self.proxy_port = None
        self.control_url = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            text = self._read(".out")
            m = re.search(r"proxy on http://127\.0\.0\.1:(\d+)", text)
            fw = re.findall(r"forwarding 127\.0\.0\.1:(\d+) ", text)
            if m and len(fw) >= len(targets) and "export http_proxy" in text:
                self.proxy_port = int(m.group(1))
                self.forwards = [int(p) for p in fw]
                c = re.search(r"control API on (http://127\.0\.0\.1:\d+)", text)
                self.control_url = c.group(1) if c else None
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.proxy_port is None:
            err = self._read(".err")[-500:]
            rc = self.proc.poll()
            self.h.stop(self.proc, wait=2)
            raise RuntimeError(f"netcond did not start (exit {rc}): {err.strip()} [{self.display}]")

    def control_status(self):
        """`GET /status` of the control API (None when it does not answer)."""
        if not self.control_url:
            return None
        import urllib.request
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(self.control_url + "/status", timeout=5) as r:
                return json.loads(r.read())
        except Exception:
            return None

    def _read(self, ext):
        try:
            with open(self.proc.log + ext, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def status(self, key):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        raise KeyError(key)

    def cpu_seconds(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def stop(self):
        """SIGINT like Ctrl-C; notes a crash, a hang on stop or a missing summary line."""
        if not self.alive():
            rc = self.proc.returncode
            self.h.note(f"netcond exited by itself during a test (exit {rc}): `{self.display}`; "
                        f"stderr: {self._read('.err')[-300:].strip()!r}")
            return None
        rc, in_time = self.h.stop(self.proc, sig=signal.SIGINT, wait=10)
        err = self._read(".err")
        if not in_time:
            self.h.note(f"netcond did not exit within 10 s of SIGINT (killed): `{self.display}`")
        elif rc != 0:
            self.h.note(f"netcond exited {rc} after SIGINT: `{self.display}`; stderr: {err[-300:].strip()!r}")
        summary = [l for l in err.splitlines() if l.startswith("netcond: ") and "seed" in l]
        if in_time and not summary:
            self.h.note(f"netcond printed no summary line on SIGINT: `{self.display}`; stderr: {err[-300:].strip()!r}")
        return summary[-1] if summary else None


def write_profile(h, name, text):
    path = os.path.join(h.tmp, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(f"name: {name}\ndescription: \"bench\"\n{text}")
    return path


# ----------------------------------------------------------------------------------------------
# clients


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def pingpong(port, n, size=100, warmup=1, start_at=None, timeout=10.0, deadline=None, stats=None,
             host="127.0.0.1", src=None, gap=0.0):
    """RTTs (s) of n exchanges of `size` bytes after `warmup` unrecorded ones. Returns (rtts, first).
    `stats` (a dict), when given, gets the client socket's TCP retransmissions (TCP_INFO). `src`:
    the local address to bind (9f: one the server has no cached TCP metrics for). `gap`: seconds
    idle before each exchange (9c's direct control idles as long as a conditioned round trip)."""
    s = socket.create_connection((host, port), timeout=timeout, source_address=(src, 0) if src else None)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * size
    rtts, first = [], None
    try:
        if start_at is not None:
            delay = start_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        for i in range(warmup + n):
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"step deadline reached after {len(rtts)} samples")
            if gap > 0:
                time.sleep(gap)
            t0 = time.perf_counter()
            s.sendall(msg)
            recv_exact(s, size)
            rtt = time.perf_counter() - t0
            if i < warmup:
                first = rtt if first is None else first
            else:
                rtts.append(rtt)
    finally:
        if stats is not None:
            try:  # struct tcp_info: tcpi_total_retrans is the u32 at offset 100
                info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
                stats["retrans"] = int.from_bytes(info[100:104], sys.byteorder)
            except OSError:
                pass
        s.close()
    return rtts, first


def download(port, total, skip, results, key, timeout=5.0, host="127.0.0.1", src=None):
    """Reads from port for `total` s; stores payload bytes/s measured between `skip` and `total`."""
    try:
        s = socket.create_connection((host, port), timeout=timeout, source_address=(src, 0) if src else None)
        s.settimeout(1.0)
        t_start = time.monotonic()
        got, b0, t0, b1, t1 = 0, None, None, None, None
        try:
            while True:
                now = time.monotonic()
                if now - t_start >= total:
                    break
                try:
                    chunk = s.recv(262144)
                except socket.timeout:
                    continue
                if not chunk:
                    raise ConnectionError("source closed the connection early")
                now = time.monotonic()
                got += len(chunk)
                if now - t_start >= skip:
                    if b0 is None:
                        b0, t0 = got, now
                    b1, t1 = got, now
        finally:
            s.close()
        if b0 is None or t1 - t0 < 0.5 * (total - skip):
            results[key] = RuntimeError(f"too little data after {skip} s ({got} bytes in total)")
        else:
            results[key] = (b1 - b0) / (t1 - t0)
    except Exception as e:
        results[key] = e


def parallel_downloads(ports, total, skip):
    """Runs `download` on every {key: port} at once; returns {key: bytes/s or the exception}."""
    res = {}
    ths = [threading.Thread(target=download, args=(port, total, skip, res, key), daemon=True)
           for key, port in ports.items()]
    for th in ths:
        th.start()
    for th in ths:
        th.join(total + 20)
    return {key: res.get(key, RuntimeError("download thread did not finish")) for key in ports}


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def within(value, ref, tol):
    return abs(value - ref) <= tol * ref


# ----------------------------------------------------------------------------------------------
# the table


class Table:
    def __init__(self, out, header):
        self.rows = []
        self.notes = []
        self.out = out
        self.header = header

    def add(self, metric, measured, target, result):
        self.rows.append((metric, measured, target, result))
        log(f"  {result:5} {metric}: {measured} (target {target})")

    def error(self, item, exc):
        self.add(item, f"error: {str(exc)[:200]}", "-", "ERROR")

    def render(self, h):
        lines = list(self.header)
        lines += ["", "| metric | measured | target | result |", "| --- | --- | --- | --- |"]
        for m, v, t, r in self.rows:
            lines.append(f"| {m} | {v} | {t} | {r} |".replace("\n", " "))
        counts = {}
        for r in self.rows:
            counts[r[3]] = counts.get(r[3], 0) + 1
        lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
        if self.notes:
            lines += ["", "Notes:", ""] + [f"- {n}" for n in self.notes]
        lines += ["", "Anomalies seen in netcond itself:", ""]
        lines += [f"- {a}" for a in h.anomalies] or ["- none"]
        lines.append(f"\nMeasuring took {time.monotonic() - h.started:.0f} s; load average at the end "
                     f"{os.getloadavg()[0]:.2f} (other work on the machine skews the timing rows).")
        return "\n".join(lines) + "\n"

    def save(self, h):
        with open(self.out, "w") as f:
            f.write(self.render(h))


# ----------------------------------------------------------------------------------------------
# items


def item_throughput(h, t):
    name = "1. pass-through throughput"
    iperf_port = free_port()
    server = h.spawn(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(iperf_port)], "iperf3-server")
    socat = nc = None
    try:
        if not wait_listening(iperf_port):
            raise RuntimeError("iperf3 server did not start")
        socat_port = free_port()
        socat = h.spawn(["socat", f"TCP-LISTEN:{socat_port},reuseaddr,fork,bind=127.0.0.1",
                         f"TCP:127.0.0.1:{iperf_port}"], "socat")
        if not wait_listening(socat_port):
            raise RuntimeError("socat did not start")
        nc = Netcond(h, "none", [iperf_port], seed=1, name="none-iperf")
        ports = {"direct": iperf_port, "socat": socat_port, "netcond": nc.forwards[0]}
        best = {k: None for k in ports}
        errors = {}
        for rnd in range(2):  # two alternating rounds, best of two per path
            for key, port in ports.items():
                try:
                    r = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "5", "-J",
                                        "--connect-timeout", "3000"], capture_output=True, timeout=25)
                    data = json.loads(r.stdout.decode() or "{}")
                    if "error" in data:
                        raise RuntimeError(data["error"])
                    bps = data["end"]["sum_received"]["bits_per_second"]
                    log(f"    iperf3 {key} round {rnd + 1}: {bps / 1e9:.2f} Gbit/s")
                    best[key] = max(best[key] or 0, bps)
                except Exception as e:
                    errors[key] = e
                    log(f"    iperf3 {key} round {rnd + 1}: error {e}")
                time.sleep(0.5)
        if not nc.alive():
            h.note("netcond died during the iperf3 pass-through test")
        if best["direct"] is None or best["netcond"] is None:
            raise RuntimeError(f"iperf3 failed: {errors}")
        g = lambda v: f"{v / 1e9:.2f} Gbit/s" if v else "n/a"
        ratio = best["netcond"] / best["direct"]
        t.add(f"{name}: netcond / direct (direct {g(best['direct'])})",
              f"{g(best['netcond'])} = {ratio:.2f}x", ">= 0.40x", "PASS" if ratio >= 0.4 else "FAIL")
        if best["socat"]:
            t.add(f"{name}: netcond vs socat", f"{g(best['netcond'])} vs {g(best['socat'])} "
                  f"({best['netcond'] / best['socat']:.2f}x)", ">= socat",
                  "PASS" if best["netcond"] >= best["socat"] else "FAIL")
        else:
            t.add(f"{name}: netcond vs socat", f"socat failed: {errors.get('socat')}", ">= socat", "ERROR")
        t.notes.append("Throughput: iperf3 one stream, 5 s, two alternating rounds (direct, socat, netcond), "
                       "best of two per path; socat run as `socat TCP-LISTEN:P,reuseaddr,fork,bind=127.0.0.1 "
                       "TCP:127.0.0.1:S` (bind added to stay on loopback).")
    finally:
        if nc:
            nc.stop()
        for p in (socat, server):
            if p:
                h.stop(p)


def pingpong_many(port, conns, n, size=100, stagger=0.2, deadline=None):
    """Ping-pong on `conns` connections at once from one thread (epoll): every connection sends
    `size` bytes, waits for the echo, records the RTT and sends again at once, `n` times after one
    unrecorded warm-up exchange. Starts are staggered over `stagger` s so that replies do not all
    land at the same moment in this client, which would measure Python rather than netcond.
    Returns (rtts, firsts, errors)."""
    msg = b"x" * size
    sel = selectors.DefaultSelector()
    state = {}
    errors = []
    for i in range(conns):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        state[s] = {"due": None, "t0": None, "got": 0, "done": 0, "rtts": [], "first": None}
    base = time.monotonic() + 0.3
    for i, s in enumerate(state):
        state[s]["due"] = base + i * stagger / conns
    waiting = {}  # sockets waiting to start
    for s in state:
        waiting[s] = state[s]["due"]
    active = 0
    try:
        while waiting or active:
            now = time.monotonic()
            if deadline is not None and now > deadline:
                errors.append(TimeoutError(f"deadline reached with {active} connections active"))
                break
            for s, due in list(waiting.items()):
                if due <= now:
                    del waiting[s]
                    st = state[s]
                    st["t0"] = time.perf_counter()
                    s.send(msg)  # 100 bytes always fit in an empty socket buffer
                    sel.register(s, selectors.EVENT_READ)
                    active += 1
            timeout = 1.0
            if waiting:
                timeout = max(0.0, min(waiting.values()) - time.monotonic())
            for key, _ in sel.select(timeout=min(timeout, 1.0)):
                s = key.fileobj
                st = state[s]
                try:
                    data = s.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as e:
                    errors.append(e)
                    sel.unregister(s)
                    active -= 1
                    continue
                t1 = time.perf_counter()
                if not data:
                    errors.append(ConnectionError("closed by peer"))
                    sel.unregister(s)
                    active -= 1
                    continue
                st["got"] += len(data)
                if st["got"] < size:
                    continue
                st["got"] -= size
                rtt = t1 - st["t0"]
                if st["done"] == 0:
                    st["first"] = rtt
                else:
                    st["rtts"].append(rtt)
                st["done"] += 1
                if st["done"] > n:
                    sel.unregister(s)
                    active -= 1
                    continue
                st["t0"] = time.perf_counter()
                s.send(msg)
    finally:
        sel.close()
        for s in state:
            s.close()
    rtts = [r for st in state.values() for r in st["rtts"]]
    firsts = [st["first"] for st in state.values() if st["first"] is not None]
    return rtts, firsts, errors


def item_latency(h, t, srv):
    """Measured twice: as the machine comes (reported), then with `netcond proxy --low-latency`, which
    holds /dev/cpu_dma_latency at 0 so that no process of the round trip pays a wake-up from a deep
    idle state (judged against the target). Without root the second pass says so and is judged as is."""
    prof = write_profile(h, "lat100", "link:\n  latency: 100ms\n")
    for low in (False, True):
        latency_pass(h, t, srv, prof, low)


def low_latency_mode(t, nc, low, what):
    """(held, label suffix) of a pass run with `--low-latency` (`low`) or as the machine comes; a
    judged pass whose hold is not in effect (no root) says so in the notes and is judged as is."""
    held = low and "--low-latency not in effect" not in nc._read(".err")
    if low and not held:
        t.notes.append(f"{what}: --low-latency was NOT in effect, so the judged rows ran on the machine's "
                       "defaults (" + nc._read(".err").strip()[-200:] + ")")
    return held, ", machine defaults" if not low else ", --low-latency" if held else ", --low-latency (NOT in effect)"


def latency_pass(h, t, srv, prof, low):
    nc = Netcond(h, prof, [srv.echo], seed=2, name="lat100", extra=["--low-latency"] if low else [])
    judged = low
    held, mode = low_latency_mode(t, nc, low, "Latency")
    name = "2. latency accuracy (100ms each way)" + mode
    try:
        port = nc.forwards[0]
        for conns in (1, 100):
            # A judged p99 of one connection is the 6th-worst of 600 samples, not the 2nd-worst of 200:
            # one descheduling of the VM (a 1-2 ms hiccup every minute or two) no longer decides it.
            n = 600 if judged and conns == 1 else 200
            load = os.getloadavg()[0]
            probe = TimerProbe(h)
            try:
                results, firsts, errors = pingpong_many(port, conns, n, deadline=time.monotonic() + n * 0.2 + 90)
            finally:
                floor = probe.finish()
            after = nc.control_status()
            label = f"{name}, {conns} conn{'s' if conns > 1 else ''}"
            if errors or len(results) < conns * n:
                t.add(label, f"{len(errors)} errors ({errors[:1]}), {len(results)} of {conns * n} samples",
                      "all samples", "ERROR")
                if not results:
                    continue
            ex = [(r - 0.2) * 1000 for r in results]
            p50, p99, mx, mn = pct(ex, 50), pct(ex, 99), max(ex), min(ex)
            def verdict(ok):
                return ("PASS" if ok else "FAIL") if judged else "INFO"
            target50, target99 = ("<= 0.5 ms", "<= 1.5 ms") if judged else ("(report)", "(report)")
            t.add(f"{label}: RTT-200ms p50", f"{p50:.3f} ms", target50, verdict(p50 <= 0.5))
            t.add(f"{label}: RTT-200ms p99", f"{p99:.3f} ms", target99, verdict(p99 <= 1.5))
            t.add(f"{label}: RTT-200ms max", f"{mx:.3f} ms", "(report)", "INFO")
            t.add(f"{label}: RTT-200ms min", f"{mn:.3f} ms", ">= 0 ms", "PASS" if mn >= 0 else "FAIL")
            if after and after.get("timer_late_us_p50_p99_max"):
                # netcond's own share: how late its link timers fired, cumulative since this netcond
                # started (so the 100-connection row includes the 1-connection samples too).
                p50_us, p99_us, max_us = after["timer_late_us_p50_p99_max"]
                t.add(f"{label}: netcond's link timer lateness since it started, p50 / p99 / max",
                      f"{p50_us:.0f} / {p99_us:.0f} / {max_us:.0f} us ({after['timer_wakeups']} wake-ups, 10 us resolution)",
                      "(evidence)", "INFO")
            if floor:
                t.add(f"{label}: control, 2 x 100ms sleeps in Python at the same time: oversleep p50 / p99 / max",
                      f"{pct(floor, 50):.3f} / {pct(floor, 99):.3f} / {max(floor):.3f} ms ({len(floor)} samples)",
                      "(timer floor of this machine)", "INFO")
            if firsts:
                t.notes.append(f"Latency{', --low-latency' if low else ''}, {conns} conn(s): the first exchange of each connection is not counted "
                               f"(warm-up); its RTT-200ms was "
                               f"{(statistics.median(firsts) - 0.2) * 1000:.2f} ms median, "
                               f"{(max(firsts) - 0.2) * 1000:.2f} ms max. Load average before: {load:.2f}.")
        if held:
            t.notes.append("Latency: 100-byte ping-pong, 200 samples per connection (600 for the judged single "
                           "connection, whose p99 is then not one outlier), TCP_NODELAY, one epoll client "
                           "thread and a one-thread epoll echo server (separate processes); the 100 connections "
                           "start staggered over 200 ms. Measured as the machine comes (reported only), then with "
                           "`netcond proxy --low-latency` (judged): netcond holds /dev/cpu_dma_latency at 0 while "
                           "it runs, so no process of the round trip pays a wake-up from a deep idle state "
                           "(0.1-0.5 ms each on this VM, several per round trip).")
    finally:
        nc.stop()


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


class TimerProbe:
    def __init__(self, h, hop=0.1):
        self.h = h
        self.proc = h.spawn([sys.executable, os.path.abspath(__file__), "timers", "--hop", str(hop)], "timers",
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def finish(self):
        """Returns the oversleeps (ms) or []."""
        try:
            out, _ = self.proc.communicate(timeout=5)  # closes stdin first: the probe stops
            return json.loads(out.decode() or "[]")
        except Exception:
            self.h.stop(self.proc)
            return []


def item_bandwidth(h, t, srv):
    name = "3. bandwidth accuracy"
    total, skip = 11.0, 1.0
    for rate_text, rate in (("240kbit", 240e3), ("2Mbit", 2e6), ("50Mbit", 50e6)):
        try:
            prof = write_profile(h, f"bw{rate_text}", f"link:\n  bandwidth: {rate_text}\n  latency: 10ms\n")
            nc = Netcond(h, prof, [srv.source], seed=3, name=f"bw{rate_text}")
            try:
                res = {}
                download(nc.forwards[0], total, skip, res, "a")
                if isinstance(res["a"], Exception):
                    raise res["a"]
                bits = res["a"] * 8
                r_rate, r_pay = bits / rate, bits / (rate * PAYLOAD_SHARE)
                t.add(f"{name} {rate_text}: goodput / rate (payload ratio)",
                      f"{bits / 1e3:.1f} kbit/s = {r_rate:.3f} of rate, {r_pay:.3f} of rate x 1460/1500",
                      "payload ratio 0.97-1.03", "PASS" if abs(r_pay - 1) <= 0.03 else "FAIL")
            finally:
                nc.stop()
        except Exception as e:
            t.error(f"{name} {rate_text}", e)
    try:
        # The same 50 Mbit/s download while netcond's process is stopped for 40 ms twice a second, as
        # a loaded machine deschedules it: the emulated sender's buffer must keep the link busy.
        prof = write_profile(h, "bw50Mbit-held", "link:\n  bandwidth: 50Mbit\n  latency: 10ms\n")
        nc = Netcond(h, prof, [srv.source], seed=3, name="bw50Mbit-held")
        stop = threading.Event()
        freezer = threading.Thread(target=hold_up, args=(nc.pid, 0.040, 0.5, stop), daemon=True)
        try:
            res = {}
            freezer.start()
            download(nc.forwards[0], total, skip, res, "a")
            stop.set()
            freezer.join(5)
            if isinstance(res["a"], Exception):
                raise res["a"]
            r_pay = res["a"] * 8 / (50e6 * PAYLOAD_SHARE)
            t.add(f"{name} 50Mbit, netcond stopped 40 ms every 0.5 s: goodput / rate (payload ratio)",
                  f"{res['a'] * 8 / 1e3:.1f} kbit/s = {r_pay:.3f} of rate x 1460/1500",
                  "payload ratio 0.97-1.03", "PASS" if abs(r_pay - 1) <= 0.03 else "FAIL")
        finally:
            stop.set()
            freezer.join(5)
            os.kill(nc.pid, signal.SIGCONT)
            nc.stop()
    except Exception as e:
        t.error(f"{name} 50Mbit, netcond stopped", e)
    try:
        prof = write_profile(h, "bw2Mbit2", "link:\n  bandwidth: 2Mbit\n  latency: 10ms\n")
        nc = Netcond(h, prof, [srv.source], seed=3, name="bw2Mbit-par")
        try:
            res = parallel_downloads({"a": nc.forwards[0], "b": nc.forwards[0]}, total, skip)
            half = 2e6 * PAYLOAD_SHARE / 2
            for k in ("a", "b"):
                v = res[k]
                if isinstance(v, Exception):
                    t.error(f"{name} 2Mbit, 2 parallel downloads, #{k}", v)
                    continue
                ratio = v * 8 / half
                t.add(f"{name} 2Mbit, 2 parallel downloads, #{'1' if k == 'a' else '2'}: goodput / half",
                      f"{v * 8 / 1e3:.1f} kbit/s = {ratio:.3f} of half the payload rate",
                      "0.90-1.10", "PASS" if abs(ratio - 1) <= 0.10 else "FAIL")
        finally:
            nc.stop()
    except Exception as e:
        t.error(f"{name} 2Mbit parallel", e)
    t.notes.append("Bandwidth: `link: {bandwidth: R, latency: 10ms}`, default queue; a Python source writes as "
                   "fast as it can; goodput measured from 1 s to 11 s. 'payload ratio' = goodput / "
                   "(R x 1460/1500); the target ±3 % of the rate is applied to it. 'netcond stopped': SIGSTOP/SIGCONT "
                   "from the bench, as a loaded machine deschedules netcond (before the send buffer followed the "
                   "window, 60 ms stops gave 0.65).")


def hold_up(pid, hold, period, stop):
    """Stops process `pid` for `hold` seconds every `period` seconds until `stop` is set; always
    leaves it running."""
    while not stop.wait(period - hold):
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(hold)
        finally:
            os.kill(pid, signal.SIGCONT)


def item_overhead(h, t, srv):
    """Measured as the machine comes (reported), then with `--low-latency` (judged), as item 2: on a
    quiet VM each of the two extra wake-ups a proxy adds to a round trip (netcond's loop, once each
    way) pays an exit from a deep idle state, which no code in netcond can shorten."""
    for low in (False, True):
        overhead_pass(h, t, srv, low)


def overhead_pass(h, t, srv, low):
    nc = Netcond(h, "none", [srv.echo], seed=4, name="none-echo", extra=["--low-latency"] if low else [])
    held, _ = low_latency_mode(t, nc, low, "Overhead")
    name = "4. proxy overhead (profile none" + (
        ")" if not low else ", --low-latency)" if held else ", --low-latency NOT in effect)")
    try:
        direct, through = [], []
        deadline = time.monotonic() + 60
        for _ in range(3):
            direct += pingpong(srv.echo, 1000, warmup=50, deadline=deadline)[0]
            through += pingpong(nc.forwards[0], 1000, warmup=50, deadline=deadline)[0]
        d50, n50 = pct(direct, 50) * 1e6, pct(through, 50) * 1e6
        d99, n99 = pct(direct, 99) * 1e6, pct(through, 99) * 1e6
        added = n50 - d50
        t.add(f"{name}: added RTT p50", f"{added:.0f} us (direct {d50:.0f} us, netcond {n50:.0f} us)",
              "<= 100 us" if low else "(report)", ("PASS" if added <= 100 else "FAIL") if low else "INFO")
        t.add(f"{name}: added RTT p99", f"{n99 - d99:.0f} us (direct {d99:.0f} us, netcond {n99:.0f} us)",
              "(report)", "INFO")
    finally:
        nc.stop()
    if low:
        t.notes.append("Overhead: 100-byte ping-pong, 3 x 1000 round trips alternating direct and through a "
                       "forward of `netcond proxy none` (control API on); judged with `--low-latency`, which "
                       "holds /dev/cpu_dma_latency at 0 for every process of the round trip, as in item 2.")


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


def item_scenario_startup(h, t):
    """netcond's own start-up in a scenario run: from exec of `netcond run SCENARIO` to the client's
    first instruction (origin, HTTPS CA, proxy, working directory, output capture all started)."""
    name = "7. scenario start-up"
    scenario = os.path.join(h.tmp, "startup.yaml")
    with open(scenario, "w") as f:
        f.write("name: startup\ndescription: start-up time\nprofile: lte\n"
                "client: {command: [sh, -c, 'date +%s%N > \"$STAMP\"'], deadline: 10s}\n"
                "checks: {stays-usable: {gives_up_within: 10s}}\n")
    stamp = os.path.join(h.tmp, "startup.stamp")
    env = dict(os.environ, STAMP=stamp)
    samples = []
    for _ in range(25):
        if os.path.exists(stamp):
            os.unlink(stamp)
        t0 = time.time_ns()
        subprocess.run([h.binary, "run", scenario, "--seed", "1", "--quiet"], env=env, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(stamp) as f:
            samples.append((int(f.read().strip()) - t0) / 1e6)
    samples = samples[1:]  # the first run warms the page cache
    p50, worst = pct(samples, 50), max(samples)
    t.add(f"{name}: exec to client start p50", f"{p50:.0f} ms (24 runs; includes exec of sh and date)",
          "<= 100 ms", "PASS" if p50 <= 100 else "FAIL")
    t.add(f"{name}: worst of 24", f"{worst:.0f} ms", "(report)", "INFO")


LOSS_REF = {  # (rtt ms, loss %, tcp): (goodput Mbit/s, 1 MB time s, note)
    (100, 0, "bbr"): (11.2, 1.19), (100, 0, "cubic"): (11.6, 1.16),
    (100, 1, "bbr"): (11.2, 1.28), (100, 1, "cubic"): (1.20, 1.77),
    (100, 5, "bbr"): (10.9, 1.48), (100, 5, "cubic"): (0.47, 19.4),
    (500, 0, "bbr"): (10.4, 4.27), (500, 0, "cubic"): (11.6, 4.09),
    (500, 1, "bbr"): (10.1, 5.66), (500, 1, "cubic"): (0.47, 8.35),
    (500, 5, "bbr"): (10.4, 6.82), (500, 5, "cubic"): (0.17, 50.6),
}


LOSS_QUEUE = "1500KB"  # 1000 packets: netem's default limit, as in the reference's packet-level emulator


def loss_profile(h, rtt, loss, tcp, queue=LOSS_QUEUE):
    return write_profile(h, f"loss-{rtt}ms-{loss}pct-{tcp}-{queue}",
                         f"tcp: {tcp}\nlink:\n  bandwidth: 12Mbit\n  latency: {rtt // 2}ms\n  loss: {loss}%\n"
                         f"  queue: {queue}\n")


def item_loss_steady(h, t, srv):
    name = "5a. steady goodput 12Mbit"
    skip = 5.0
    for rtt in (100, 500):
        # A loss-bound cubic sawtooth at 500 ms has periods of seconds: measure long enough to average it.
        total = 45.0 if rtt == 100 else 65.0
        cells = [(rtt, loss, tcp) for loss in (0, 1, 5) for tcp in ("bbr", "cubic")]
        if rtt == 500:  # extra, informational: the same cell behind a shallow 64KB buffer
            cells.append((500, 0, "cubic", "64KB"))
        if h.remaining() < total + 60:
            for c in cells:
                t.add(f"{name} RTT {c[0]}ms loss {c[1]}% {c[2]}", "skipped: time budget", "-", "SKIP")
            continue
        # A loss-bound cubic cell moves a few segments per round trip: one 60 s run is a handful of
        # sawtooth periods, so those cells take the median of three seeds; the others one seed.
        def seeds_for(c):
            return (5, 6, 7) if c[2] == "cubic" and c[1] > 0 else (5,)

        ncs, res = {}, {}
        try:
            for c in cells:
                for seed in seeds_for(c):
                    try:
                        ncs[(c, seed)] = Netcond(h, loss_profile(h, *c), [srv.source], seed=seed,
                                                 name=f"steady-{c[0]}-{c[1]}-{c[2]}-{seed}")
                    except Exception as e:
                        res[(c, seed)] = e
            res.update(parallel_downloads({key: nc.forwards[0] for key, nc in ncs.items()}, total, skip))
        finally:
            for nc in ncs.values():
                nc.stop()
        for c in cells:
            ref = LOSS_REF[c[:3]][0]
            label = f"{name} RTT {c[0]}ms loss {c[1]}% {c[2]}" + (f", queue {c[3]} (extra)" if len(c) > 3 else "")
            values = [res.get((c, seed), RuntimeError("no result")) for seed in seeds_for(c)]
            errors = [v for v in values if isinstance(v, Exception)]
            if errors:
                t.error(label, errors[0])
                continue
            runs = sorted(v * 8 / 1e6 for v in values)
            mbit = runs[len(runs) // 2]
            spread = f", seeds 5-7: {runs[0]:.2f}-{runs[-1]:.2f}" if len(runs) > 1 else ""
            verdict = "PASS" if within(mbit, ref, 0.3) else "FAIL"
            t.add(label, f"{mbit:.2f} Mbit/s ({mbit / ref:.2f}x ref{spread})", f"{ref} Mbit/s ±30 %",
                  verdict if len(c) == 3 else f"INFO ({verdict.lower()})")
    t.notes.append("Steady goodput: a download from a Python source through a forward (45 s at 100 ms, 65 s at "
                   "500 ms), measured from 5 s; the cells of one RTT run at the same time, each in its own netcond "
                   "process (each its own emulated link, 12 Mbit/s each; loopback and CPU are far from saturated). "
                   f"Profiles: `tcp: T, link: {{bandwidth: 12Mbit, latency: RTT/2, loss: L, queue: {LOSS_QUEUE}}}`: "
                   "1000 packets, netem's default queue limit (the reference was measured through a packet-level "
                   "emulator; the issue names no queue). The extra 64KB row shows unpaced cubic slow start "
                   "overflowing a shallow buffer at 500 ms (informational). Loss-bound cubic cells are the median of "
                   "seeds 5-7 (a 60 s run at 500 ms holds only a few sawtooth periods); the others use seed 5.")


def fresh_downloads(h, c, seeds, limit):
    """1 MB over the cell's link through one netcond per seed, all at once: (times, failures);
    a download that hit `limit` counts as infinitely slow."""
    ncs, procs = [], []
    try:
        prof = loss_profile(h, *c)
        for seed in seeds:
            ncs.append(Netcond(h, prof, [], seed=seed, name=f"curl-{c[0]}-{c[1]}-{c[2]}"))
        for i, nc in enumerate(ncs):
            procs.append(h.spawn(["curl", "-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download} %{http_code}",
                                  "--max-time", str(limit), "-x", f"http://127.0.0.1:{nc.proxy_port}",
                                  "http://origin.netcond.test/bytes/1MB"], f"curl-{c[0]}-{c[1]}-{c[2]}-{i}",
                                 stdout=subprocess.PIPE))
        times, fails = [], []
        for p in procs:
            try:
                out, _ = p.communicate(timeout=limit + 15)
            except subprocess.TimeoutExpired:
                h.stop(p)
                out = b""
            parts = out.decode().split()
            if p.returncode == 0 and len(parts) == 3 and parts[1] == "1048576" and parts[2] == "200":
                times.append(float(parts[0]))
            else:
                fails.append(f"curl exit {p.returncode} {out.decode()!r}")
                if p.returncode == 28:
                    times.append(float("inf"))  # timed out: slower than the limit
        return times, fails
    finally:
        for nc in ncs:
            nc.stop()


def item_loss_curl(h, t):
    name = "5b. 1 MB via HTTP proxy (median of 5 seeds)"
    order = [(100, 0, "bbr"), (100, 0, "cubic"), (100, 1, "bbr"), (100, 1, "cubic"), (100, 5, "bbr"),
             (500, 0, "bbr"), (500, 0, "cubic"), (500, 1, "bbr"), (500, 1, "cubic"), (500, 5, "bbr"),
             (100, 5, "cubic"), (500, 5, "cubic")]  # slowest last so a short budget skips them
    limits = {(100, 5, "cubic"): 60, (500, 5, "cubic"): 110}
    for c in order:
        ref = LOSS_REF[c][1]
        label = f"{name} RTT {c[0]}ms loss {c[1]}% {c[2]}"
        limit = limits.get(c, max(30, int(ref * 4)))
        if h.remaining() < limit + 10:
            t.add(label, f"skipped: time budget (needs up to {limit} s)", f"{ref} s ±30 %", "SKIP")
            continue
        try:
            times, fails = fresh_downloads(h, c, range(11, 16), limit)
        except Exception as e:
            t.error(label, e)
            continue
        finite = sorted(x for x in times if x != float("inf"))
        if len(times) < 3:
            t.add(label, f"{len(times)} of 5 runs finished: {fails[:2]}", f"{ref} s ±30 %", "ERROR")
            continue
        med = sorted(times)[len(times) // 2]
        spread = f"{finite[0]:.2f}-{finite[-1]:.2f}" if finite else "-"
        extra = f", {len(times) - len(finite)} over {limit} s" if len(finite) < len(times) else ""
        bad = f", {len(fails)} failed" if fails else ""
        if c in KERNEL_REFERENCE:
            # Real TCP on this machine takes twice the issue's figure here: judged against it in 5d.
            t.add(label, f"{med:.2f} s (runs {spread}{extra}{bad})", f"{ref} s ±30 % (the issue's; judged in 5d)",
                  "INFO" if not fails else "FAIL")
            continue
        t.add(label, f"{med:.2f} s (runs {spread}{extra}{bad})", f"{ref} s ±30 %",
              "PASS" if within(med, ref, 0.3) and not fails else "FAIL")
    t.notes.append("1 MB time: `curl -s -o /dev/null -w '%{time_total}' -x http://127.0.0.1:P "
                   "http://origin.netcond.test/bytes/1MB`, five netcond processes (seeds 11-15) at once per cell, "
                   "median; cubic 5 % cells run last and are skipped if the time budget is short.")


# Cells where the issue's figure and real TCP on this machine disagree: (rtt, loss, tcp), kernel runs, limit.
# A single download is luck: the time is bimodal (no loss early in slow start, or a slow climb after
# one), and medians of 25-80 kernel runs ranged 2.3-3.9 s (100 ms) and 9.4-13.5 s (500 ms) between
# sets, and their means by ±15 % (sets of 60-80). Both sides take 100 samples — the kernel's in five
# parallel instances (each its own namespaces, devices and emulated link), netcond's ten processes at
# a time — and are judged on the mean.
KERNEL_CELLS = [((100, 1, "cubic"), 100, 30), ((500, 1, "cubic"), 100, 90)]
KERNEL_INSTANCES = 5
NETCOND_SEEDS, NETCOND_AT_ONCE = 100, 10
KERNEL_REFERENCE = {cell for cell, _, _ in KERNEL_CELLS}


def quartiles(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 4], statistics.median(ordered), ordered[(3 * len(ordered)) // 4]


def mean_interval(values):
    """The mean and the half-width of its 95 % confidence interval."""
    return statistics.mean(values), 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def download_times(output, size=1 << 20):
    """The times of the complete downloads in tcp_reference.py's (or `bench.py client fresh`'s) output:
    its "SECONDS BYTES" lines whose BYTES is `size`."""
    return [float(line.split()[0]) for line in output.splitlines()
            if line and line[0].isdigit() and line.split()[1] == str(size)]


def kernel_reference(h, c, runs, limit, instances=KERNEL_INSTANCES):
    """1 MB download times of the kernel's own TCP for cell `c`: `runs` runs spread over
    `instances` instances of tcp_reference.py at once (distinct namespaces and seeds)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tcp_reference.py")
    procs = []
    per = -(-runs // instances)
    try:
        for i in range(instances):
            procs.append(h.spawn([sys.executable, script, "--rtt", f"{c[0]}ms", "--loss", f"{c[1]}%", "--cc", c[2],
                                  "--runs", str(per), "--seed", str(101 + i), "--tag", f"b{i}"],
                                 f"kernel-{c[0]}-{c[1]}-{c[2]}-{i}", stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        times, errors = [], []
        deadline = time.monotonic() + per * limit + 60
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                h.stop(p)
                raise RuntimeError(f"the kernel reference did not finish in {per * limit + 60} s")
            got = download_times(out.decode())
            times += got
            if len(got) < per:
                errors.append(err.decode()[-300:])
        if len(times) < runs // 2:
            raise RuntimeError(f"the kernel reference gave {len(times)} of {runs} results: {' | '.join(errors)}")
        return times
    finally:
        for p in procs:
            if p.poll() is None:
                h.stop(p)


def item_kernel_reference(h, t):
    """Real Linux TCP through a per-packet emulator (scripts/bench.d/tcp_reference.py) against netcond,
    both on a fresh connection, for the cells where the issue's reference figure is in doubt."""
    name = "5d. 1 MB, netcond vs real Linux TCP"
    for c, runs, limit in KERNEL_CELLS:
        label = f"{name} RTT {c[0]}ms loss {c[1]}% {c[2]}"
        target = "netcond mean within ±30 % of the kernel's"
        if os.geteuid() != 0:
            t.add(label, "skipped: needs root (network namespaces, TUN)", target, "SKIP")
            continue
        needed = (runs / KERNEL_INSTANCES * 1.5 + NETCOND_SEEDS / NETCOND_AT_ONCE * 2) * LOSS_REF[c][1] * 2
        if h.remaining() < needed:
            t.add(label, f"skipped: time budget (needs about {needed:.0f} s)", target, "SKIP")
            continue
        try:
            kernel = kernel_reference(h, c, runs, limit)
            model, fails = [], []
            for first in range(21, 21 + NETCOND_SEEDS, NETCOND_AT_ONCE):
                times, failed = fresh_downloads(h, c, range(first, first + NETCOND_AT_ONCE), limit)
                model += times
                fails += failed
        except Exception as e:
            t.error(label, e)
            continue
        if fails:
            t.add(label, f"netcond: {len(fails)} of {NETCOND_SEEDS} downloads failed: {fails[:2]}", target, "FAIL")
            continue
        kq, mq = quartiles(kernel), quartiles(model)
        (km, kh), (mm, mh) = mean_interval(kernel), mean_interval(model)
        t.add(label,
              f"mean: netcond {mm:.2f} s (±{mh:.2f}, {len(model)} seeds) vs kernel {km:.2f} s (±{kh:.2f}, "
              f"{len(kernel)} runs) = {mm / km:.2f}x; median {mq[1]:.2f} vs {kq[1]:.2f} s, quartiles "
              f"{mq[0]:.2f}-{mq[2]:.2f} vs {kq[0]:.2f}-{kq[2]:.2f}; the issue's figure {LOSS_REF[c][1]} s",
              target, "PASS" if within(mm, km, 0.3) else "FAIL")
        t.notes.append(f"5d samples, RTT {c[0]}ms loss {c[1]}% {c[2]} (s, sorted): kernel "
                       f"{' '.join(f'{x:.2f}' for x in sorted(kernel))}; netcond "
                       f"{' '.join(f'{x:.2f}' for x in sorted(model))}")
    t.notes.append("5d: the kernel's own cubic through scripts/bench.d/tcp_reference.py (two network namespaces, "
                   "TUN devices, one process carrying every packet: 12 Mbit/s each way, FIFO of 1000 packets, "
                   "half the RTT each way, i.i.d. loss of whole packets both ways; no GSO, no cached metrics), "
                   f"fresh connection from connect() to the last byte, {KERNEL_INSTANCES} instances at once; "
                   f"netcond {NETCOND_AT_ONCE} processes at once (seeds 21-{20 + NETCOND_SEEDS}). Judged on the mean "
                   "(± its 95 % confidence interval): the distribution is bimodal (no loss early in slow start: "
                   "about 1.2 s at 100 ms; else spread to 8 s): between sets of 60 the median varies by 13 % "
                   "(one standard deviation; the kernel's sets gave 2.3-3.9 s) and the mean by 7 %; with 100 "
                   "samples a side the mean's 95 % interval is about ±12 %.")


def item_bufferbloat(h, t, srv):
    name = "5c. bufferbloat (2Mbit, 50ms each way, queue 64KB, cubic)"
    prof = write_profile(h, "bloat", "tcp: cubic\nlink:\n  bandwidth: 2Mbit\n  latency: 50ms\n  queue: 64KB\n")
    nc = Netcond(h, prof, [srv.echo, srv.source], seed=6, name="bloat")
    try:
        echo_port, src_port = nc.forwards
        idle, _ = pingpong(echo_port, 20, deadline=time.monotonic() + 30)
        res = {}
        th = threading.Thread(target=download, args=(src_port, 22.0, 1.0, res, "bulk"), daemon=True)
        th.start()
        time.sleep(5)
        loaded, _ = pingpong(echo_port, 40, warmup=0, deadline=time.monotonic() + 16)
        th.join(30)
        i50 = pct(idle, 50) * 1000
        l50, lmax = pct(loaded, 50) * 1000, max(loaded) * 1000
        t.add(f"{name}: idle RTT p50", f"{i50:.1f} ms", "104 ms ±30 %", "PASS" if within(i50, 104, 0.3) else "FAIL")
        t.add(f"{name}: loaded RTT p50", f"{l50:.1f} ms", "314 ms ±30 %", "PASS" if within(l50, 314, 0.3) else "FAIL")
        t.add(f"{name}: loaded RTT max", f"{lmax:.1f} ms", "362 ms ±30 %", "PASS" if within(lmax, 362, 0.3) else "FAIL")
        bulk = res.get("bulk")
        if isinstance(bulk, (int, float)):
            t.notes.append(f"Bufferbloat: the bulk download ran at {bulk * 8 / 1e3:.0f} kbit/s of payload while loaded; "
                           "20 idle samples, then 40 loaded samples starting 5 s after the download began.")
    finally:
        nc.stop()


def item_memory(h, t, srv):
    name = "6. memory"
    nc = Netcond(h, "none", [srv.echo], seed=7, name="none-mem")
    socks = []

    def open_batch(port, count, batch, deadline):
        """Opens `count` connections, each confirmed by a 1-byte echo. Returns (ok, errors)."""
        ok, errs = 0, []
        while ok + len(errs) < count and time.monotonic() < deadline:
            group = []
            for _ in range(min(batch, count - ok - len(errs))):
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=10)
                    s.sendall(b"!")
                    group.append(s)
                    socks.append(s)
                except OSError as e:
                    errs.append(e)
            sel = selectors.DefaultSelector()
            for s in group:
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ)
            left = len(group)
            end = time.monotonic() + 15
            while left and time.monotonic() < end:
                for key, _ in sel.select(timeout=1):
                    try:
                        data = key.fileobj.recv(16)
                        if data == b"!":
                            ok += 1
                        else:
                            errs.append(ConnectionError("closed instead of echo"))
                    except OSError as e:
                        errs.append(e)
                    sel.unregister(key.fileobj)
                    left -= 1
            if left:
                errs += [TimeoutError("no echo within 15 s")] * left
            sel.close()
        return ok, errs

    def close_all():
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
        socks.clear()

    try:
        port = nc.forwards[0]
        open_batch(port, 20, 20, time.monotonic() + 20)  # warm up code paths and allocator
        close_all()
        time.sleep(1.0)
        rss0 = nc.status("VmRSS")
        ok, errs = open_batch(port, 1000, 100, time.monotonic() + 60)
        time.sleep(1.0)
        rss1 = nc.status("VmRSS")
        per = (rss1 - rss0) / 1000
        if ok < 1000:
            t.add(f"{name}: 1,000 idle connections", f"{ok} ok, {len(errs)} errors ({errs[:1]})", "1000 ok", "ERROR")
        t.add(f"{name}: RSS delta per idle connection (1,000)", f"{per:.1f} KiB ({rss0} -> {rss1} KiB)",
              "<= 32 KiB", "PASS" if per <= 32 and ok == 1000 else "FAIL")
        close_all()
        time.sleep(1.0)
        limit = os.sysconf("SC_OPEN_MAX")
        try:
            nc_limit = open(f"/proc/{nc.pid}/limits").read()
            nc_nofile = int(re.search(r"Max open files\s+(\d+)", nc_limit).group(1))
        except Exception:
            nc_nofile = -1
        # 10,000 connections in one run, as many at once as netcond's descriptors allow (two per
        # proxied connection), every one confirmed by its echo.
        concurrent = 10000 if nc_nofile < 0 else max(100, min(10000, (nc_nofile - 200) // 2))
        t0 = time.monotonic()
        ok, errs = 0, []
        while ok + len(errs) < 10000 and time.monotonic() - t0 < 240:
            batch_ok, batch_errs = open_batch(port, min(concurrent, 10000 - ok - len(errs)), 250,
                                              time.monotonic() + 120)
            ok += batch_ok
            errs += batch_errs
            if ok + len(errs) < 10000:
                close_all()
        took = time.monotonic() - t0
        rss2 = nc.status("VmRSS") if nc.alive() else -1
        fds_open = nc.fd_count() if nc.alive() else -1
        cpu = -1.0
        if nc.alive():
            c0 = nc.cpu_seconds()
            time.sleep(3.0)
            cpu = (nc.cpu_seconds() - c0) / 3.0 * 100
        close_all()
        time.sleep(2.0)
        alive = nc.alive()
        fds_after = nc.fd_count() if alive else -1
        after_ok = False
        if alive:
            try:
                pingpong(port, 3, timeout=5)
                after_ok = True
            except Exception:
                pass
        kinds = {}
        for e in errs:
            kinds[type(e).__name__ + ": " + str(e)[:60]] = kinds.get(type(e).__name__ + ": " + str(e)[:60], 0) + 1
        fd_note = f", at most {concurrent} at once (netcond may open {nc_nofile} files here)"
        t.add(f"{name}: 10,000 connections in a run", f"{ok} ok, {len(errs)} errors in {took:.1f} s{fd_note}"
              + (f" {dict(list(kinds.items())[:2])}" if kinds else "")
              + f"; RSS {rss2 / 1024:.0f} MiB, {fds_open} fds open, netcond CPU {cpu:.0f} % while they sit idle",
              "10000 ok, no errors", "PASS" if ok == 10000 and not errs and alive and after_ok else "FAIL")
        t.add(f"{name}: after closing 10,000", f"netcond {'alive' if alive else 'DEAD'}, "
              f"{fds_after} fds open, new connection {'works' if after_ok else 'FAILS'}",
              "alive, works", "PASS" if alive and after_ok else "FAIL")
        t.notes.append(f"Memory: VmRSS of the netcond process before/after opening 1,000 connections (each confirmed "
                       f"by a 1-byte echo from a local server that holds them), after a 20-connection warm-up. "
                       f"Open-file limits: bench {limit}, netcond {nc_nofile}.")
        if cpu > 50:
            h.note(f"netcond used {cpu:.0f} % CPU while holding idle connections with more waiting in its accept "
                   f"queue at its open-file limit ({nc_nofile}): accept() failing with EMFILE looks like a busy "
                   f"loop, and the waiting clients get neither data nor a close")
        if alive and fds_after > 100:
            h.note(f"netcond still had {fds_after} fds open 2 s after 10,000 connections closed (leak?)")
    finally:
        close_all()
        nc.stop()


# ----------------------------------------------------------------------------------------------
# 9. the packet engine: `netcond run --engine packet PROFILE -- CMD` (the client runs as CMD)


CGROUP_ROOTS = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")  # hybrid hierarchy first, as netcond looks
PACKET_PAYLOAD_SHARE = 1448 / 1500  # TCP payload of a 1,500-byte packet: MSS clamped to 1460, minus 12 of timestamps


def packet_missing():
    """Why the packet engine cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (cgroup, nft, iptables NFQUEUE)"
    for tool in ("nft", "iptables", "ip6tables"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin")):
            return f"{tool} is not installed"
    return None


def packet_leftovers(pid, remove=True):
    """What a `netcond run --engine packet` of process id `pid` left on the host: its cgroup (and
    the processes still in it), its nft table, its iptables rules. Removed when `remove`; returns
    their descriptions. scripts/bench's trap does the same for the pids in TMP/packet-pids."""
    found = []
    name = f"netcond-{pid}"
    for root in CGROUP_ROOTS:
        d = os.path.join(root, name)
        if not os.path.isdir(d):
            continue
        found.append(f"cgroup {d}")
        if not remove:
            continue
        try:
            with open(os.path.join(d, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except OSError:
                break
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.05)
        try:
            os.rmdir(d)
        except OSError:
            pass
    table = f"netcond_{pid}"
    try:
        if subprocess.run(["nft", "list", "table", "inet", table], capture_output=True, timeout=10).returncode == 0:
            found.append(f"nft table inet {table}")
            if remove:
                subprocess.run(["nft", "delete", "table", "inet", table], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass
    for tool in ("iptables", "ip6tables"):
        try:
            listing = subprocess.run([tool, "-w", "5", "-t", "mangle", "-S"], capture_output=True, text=True,
                                     timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in listing.splitlines():
            words = [w.strip('"') for w in line.split()]
            if words[:1] != ["-A"] or name not in words:
                continue
            found.append(f"{tool} {line}")
            if remove:
                try:
                    subprocess.run([tool, "-w", "5", "-t", "mangle", "-D", *words[1:]], capture_output=True, timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    pass
    return found


def own_cpu_seconds(pid):
    """utime + stime of process `pid`'s own threads (not its children), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def nfqueue_users():
    """{queue number: peer port id} of the host's NFQUEUEs now (/proc/net/netfilter/nfnetlink_queue)."""
    try:
        with open("/proc/net/netfilter/nfnetlink_queue") as f:
            return {int(l.split()[0]): int(l.split()[1]) for l in f if len(l.split()) > 2}
    except (OSError, ValueError):
        return {}


class PacketRun:
    """One `netcond run --engine packet PROFILE -- CMD`, run to its end (or stopped at `timeout`):
    CMD's stdout, netcond's summary line parsed, netcond's own CPU time (read from /proc when it
    has exited but is not yet reaped, so its engine thread's time is all there and its child's is
    not), and anything it left on the host (removed, and noted as an anomaly)."""

    SUMMARY = re.compile(r"^netcond: .* \(packet engine\): .*\(seed \d+\)$", re.M)

    def __init__(self, h, profile, command, name, seed=9, timeout=60.0, extra=()):
        h.netcond_count += 1
        self.name = f"{name}-{h.netcond_count}"
        self.argv = [h.binary, "run", "--engine", "packet", "--seed", str(seed), *extra, profile, "--", *command]
        self.display = " ".join(self.argv)
        started = time.monotonic()
        proc = h.spawn(self.argv, self.name)
        self.pid = proc.pid
        with open(os.path.join(h.tmp, "packet-pids"), "a") as f:
            f.write(f"{proc.pid}\n")
        self.cpu = None
        queues = {}  # NFQUEUE number -> peer port id, every queue seen while this run went on
        timed_out = False
        try:
            deadline = started + timeout
            while True:
                queues.update(nfqueue_users())
                try:
                    exited = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    exited = True  # already reaped
                cpu = own_cpu_seconds(proc.pid)
                if cpu is not None:
                    self.cpu = cpu
                if exited is not None:
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                # SIGINT as Ctrl-C: netcond forwards it to CMD (5 s grace), then removes its cage.
                h.stop(proc, sig=signal.SIGINT, wait=15)
            left = packet_leftovers(proc.pid)
        self.wall = time.monotonic() - started
        self.rc = proc.returncode
        # Another NFQUEUE user (another packet engine) at the same time: its start and end change
        # the host's netfilter hooks, and the kernel drops every queued packet when a hook goes
        # (e.g. an nft table with base chains deleted), which netcond does not see as a loss.
        ours = queues.get(1000 + (proc.pid % 30000) * 2)
        self.others = len({peer for peer in queues.values() if peer != ours}) if ours is not None \
            else max(0, len(set(queues.values())) - 1)
        self.out = self._read(proc.log + ".out")
        self.err = self._read(proc.log + ".err")
        if left:
            h.note(f"netcond run --engine packet left {', '.join(left)[:300]} after `{self.display}` (removed by the bench)")
        if timed_out:
            raise TimeoutError(f"did not finish in {timeout:.0f} s: `{self.display}`; stderr {self.err[-300:].strip()!r}")
        m = self.SUMMARY.findall(self.err)
        self.summary = m[-1] if m else None
        if self.summary is None:
            h.note(f"netcond run --engine packet printed no summary line (exit {self.rc}): `{self.display}`; "
                   f"stderr {self.err[-300:].strip()!r}")
            raise RuntimeError(f"no summary line (exit {self.rc}); stderr {self.err[-300:].strip()!r}")
        s = self.summary

        def num(pattern, default=0, kind=int):
            found = re.search(pattern, s)
            return kind(found.group(1)) if found else default
        self.elapsed = num(r"\): ([\d.]+) s,", float("nan"), float)
        self.up_packets = num(r"up [\d.]+ \w+ in (\d+) packet")
        self.down_packets = num(r"down [\d.]+ \w+ in (\d+) packet")
        self.lost = num(r"(\d+) packets? lost")
        self.kernel_drops = num(r"could not keep up (\d+) time")
        # Packets the kernel dropped from netcond's queue (another program's firewall change).
        self.vanished = num(r"(\d+) packets? (?:was|were) dropped by the kernel while")
        self.late = num(r"(\d+) packets? (?:was|were) released over 1 ms late")
        self.longest_late_ms = num(r"released over 1 ms late \(longest (\d+) ms\)")

    @staticmethod
    def _read(path):
        try:
            with open(path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def json_out(self):
        """The JSON object CMD printed last on stdout."""
        lines = [l for l in self.out.splitlines() if l.startswith("{")]
        if not lines:
            raise RuntimeError(f"no result from the command (exit {self.rc}); stdout {self.out[-200:].strip()!r}, "
                               f"stderr {self.err[-300:].strip()!r}")
        return json.loads(lines[-1])

    def evidence(self):
        """The summary's losses and lateness, short."""
        bits = [f"{self.up_packets} up + {self.down_packets} down packets"]
        if self.lost:
            bits.append(f"{self.lost} lost")
        if self.kernel_drops:
            bits.append(f"kernel dropped {self.kernel_drops} times")
        if self.vanished:
            bits.append(f"{self.vanished} flushed from the queue by the kernel (another program's firewall change)")
        bits.append(f"{self.late} released > 1 ms late" + (f" (longest {self.longest_late_ms} ms)" if self.late else ""))
        if self.others:
            bits.append(f"{self.others} other NFQUEUE user(s) active meanwhile")
        return ", ".join(bits)


def client_argv(*args):
    """The bench's own client (`bench.py client ...`), to run as CMD under netcond or directly."""
    return [sys.executable, os.path.abspath(__file__), "client", *map(str, args)]


def client_direct(h, argv, name, timeout):
    """Runs a `bench.py client` without netcond; returns its JSON."""
    proc = h.spawn(argv, name, stdout=subprocess.PIPE)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        h.stop(proc)
        raise TimeoutError(f"{name} did not finish in {timeout:.0f} s")
    lines = [l for l in out.decode(errors="replace").splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"{name} printed no result (exit {proc.returncode})")
    return json.loads(lines[-1])


def client_result(data, what):
    if "error" in data:
        raise RuntimeError(f"{what}: {data['error']}")
    return data


class CPULatencyHold:
    """/dev/cpu_dma_latency held at 0 by the bench itself (as `--low-latency` does in netcond), so
    that a direct path measured next to netcond runs under the same CPU idle policy."""

    def __enter__(self):
        self.f = None
        try:
            self.f = open("/dev/cpu_dma_latency", "wb", buffering=0)
            self.f.write((0).to_bytes(4, sys.byteorder))
        except OSError:
            if self.f:
                self.f.close()
            self.f = None
        return self

    def __exit__(self, *exc):
        if self.f:
            self.f.close()


def packet_profile(h, name, down, up):
    """A profile with `down:` and `up:` sections, each a dict of keys."""
    body = ""
    for section, keys in (("down", down), ("up", up)):
        body += f"{section}:\n" + "".join(f"  {k}: {v}\n" for k, v in keys.items())
    return write_profile(h, name, body)


def item_packet(h, t, srv):
    name = "9. packet engine"
    subs = [("9a", "throughput", packet_throughput), ("9b", "added RTT", packet_overhead),
            ("9c", "100ms each way", packet_latency), ("9d", "rate", packet_rate), ("9e", "UDP", packet_udp),
            ("9f", "loss fidelity", packet_loss_fidelity), ("9g", "QUIC", packet_quic)]
    # `--only 9` runs them all; `--only 9b,9e` only those.
    only = getattr(h, "only", None)
    if only and "9" not in only:
        subs = [s for s in subs if s[0] in only]
    why = packet_missing()
    if why:
        for key, what, _ in subs:
            t.add(f"{name}: {key} {what}", f"skipped: {why}", "-", "INFO")
        return
    for _, _, fn in subs:
        try:
            fn(h, t, srv)
        except KeyboardInterrupt:
            raise
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            t.error(f"{name}: {fn.__name__}", e)
    t.notes.append("Packet engine (9): every client runs as the command of `netcond run --engine packet --seed 9 "
                   "PROFILE -- CMD` (its own cgroup; nft + iptables NFQUEUE send its packets, both directions, to "
                   "netcond); servers run outside it on 127.0.0.1. Profiles set `down:` and `up:` separately. "
                   "The lateness counts are netcond's own summary line (verdicts sent over 1 ms after their "
                   "moment). After every run the bench checks that no cgroup, nft table or iptables rule is left.")


def iperf3_client(port, seconds=5):
    return ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J", "--connect-timeout", "3000"]


def iperf3_bps(text):
    data = json.loads(text or "{}")
    if "error" in data:
        raise RuntimeError(data["error"])
    return data["end"]["sum_received"]["bits_per_second"]


def packet_throughput(h, t, srv):
    name = "9a. packet engine throughput"
    passthrough = packet_profile(h, "pkt-pass", {"latency": "0ms"}, {"latency": "0ms"})
    # A rate (however high) makes the engine decide per packet: the kernel segments iperf3's GSO
    # sends into 1,500-byte packets, one verdict each. The queue is large so that a batch of
    # packets read at one instant is not dropped by the default 64 KB limit.
    perpacket = packet_profile(h, "pkt-perpacket", {"latency": "0ms"},
                               {"latency": "0ms", "bandwidth": "100gbit", "queue": "16MB"})
    iperf_port = free_port()
    server = h.spawn(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(iperf_port)], "iperf3-server-9a")
    try:
        if not wait_listening(iperf_port):
            raise RuntimeError("iperf3 server did not start")
        best = {"direct": None, "pass": None, "perpacket": None}
        errors = {}
        for rnd in range(2):  # two alternating rounds, best of two per path, as item 1
            for key in best:
                try:
                    if key == "direct":
                        r = subprocess.run(iperf3_client(iperf_port), capture_output=True, timeout=25)
                        bps, run = iperf3_bps(r.stdout.decode()), None
                    else:
                        run = PacketRun(h, passthrough if key == "pass" else perpacket, iperf3_client(iperf_port),
                                        f"pkt-iperf-{key}", timeout=30)
                        bps = iperf3_bps(run.out)
                    log(f"    iperf3 {key} round {rnd + 1}: {bps / 1e9:.2f} Gbit/s"
                        + (f"; {run.summary}; netcond CPU {run.cpu:.2f} s" if run else ""))
                    if best[key] is None or bps > best[key][0]:
                        best[key] = (bps, run)
                except Exception as e:
                    errors[key] = e
                    log(f"    iperf3 {key} round {rnd + 1}: error {e}")
                time.sleep(0.5)
        g = lambda v: f"{v / 1e9:.2f} Gbit/s"
        if best["direct"]:
            t.add(f"{name}: direct (no netcond), iperf3 one stream 5 s", g(best["direct"][0]), "(reference)", "INFO")
        else:
            t.error(f"{name}: direct", errors.get("direct"))
        direct = best["direct"][0] if best["direct"] else None
        if best["pass"]:
            bps, run = best["pass"]
            ratio = f" = {bps / direct:.2f}x direct" if direct else ""
            t.add(f"{name}: pass-through (latency 0ms both ways; GSO packets whole)",
                  f"{g(bps)}{ratio}; {run.evidence()}; netcond CPU {run.cpu:.2f} s in {run.elapsed:.2f} s",
                  ">= 2 Gbit/s", "PASS" if bps >= 2e9 else "FAIL")
        else:
            t.error(f"{name}: pass-through", errors.get("pass"))
        if best["perpacket"]:
            bps, run = best["perpacket"]
            verdicts = run.up_packets + run.down_packets
            cpu_us = run.cpu / verdicts * 1e6 if verdicts and run.cpu is not None else float("nan")
            wall_us = run.elapsed / run.up_packets * 1e6 if run.up_packets else float("nan")
            t.add(f"{name}: per-packet verdicts (up bandwidth 100gbit: 1,500-byte packets, one verdict each)",
                  f"{g(bps)}; {cpu_us:.2f} us of netcond CPU per packet ({run.cpu:.2f} s / {verdicts} packets up + "
                  f"down); wall {wall_us:.2f} us per data packet ({run.elapsed:.2f} s / {run.up_packets} up); "
                  f"{run.evidence()}", "(report)", "INFO")
        else:
            t.error(f"{name}: per-packet verdicts", errors.get("perpacket"))
    finally:
        h.stop(server)
    t.notes.append("9a: iperf3 one stream, 5 s, client under `netcond run --engine packet` (server outside, "
                   "127.0.0.1), two alternating rounds (direct, pass-through, per-packet), best of two per path. "
                   "Pass-through: `down/up: {latency: 0ms}` (no rate, no loss: the queue takes GSO packets whole). "
                   "Per-packet: up `{latency: 0ms, bandwidth: 100gbit, queue: 16MB}`: the kernel segments, so each "
                   "1,500-byte packet is one verdict. CPU per packet = netcond's own CPU time (user + system of its "
                   "threads, which includes the kernel's reinjection of each accepted packet; read from /proc when "
                   "it has exited, before it is reaped) / (up + down packets of its summary line); wall per data "
                   "packet = the summary's elapsed time / up packets.")


def packet_overhead(h, t, srv):
    """Added RTT of the packet engine with a pass-through profile: the bench's ping-pong client
    (100 bytes, TCP_NODELAY) run directly and as CMD, alternating, 3 x 1000 round trips each; as the
    machine comes (reported), then with /dev/cpu_dma_latency held at 0 (judged), as item 4."""
    prof = packet_profile(h, "pkt-pass-rtt", {"latency": "0ms"}, {"latency": "0ms"})
    argv = client_argv("pingpong", "--port", srv.echo, "--n", 1000, "--warmup", 50, "--deadline", 30)
    for low in (False, True):
        label = "9b. packet engine added RTT (pass-through" + (", --low-latency)" if low else ")")
        with CPULatencyHold() if low else contextlib.nullcontext() as hold:
            if low and hold.f is None:
                label += " (hold NOT in effect)"
            direct, through, runs = [], [], []
            for i in range(3):
                direct += client_result(client_direct(h, argv, f"pp-direct-{int(low)}-{i}", 40), "direct")["rtts"]
                run = PacketRun(h, prof, argv, f"pkt-pp-{int(low)}", timeout=45,
                                extra=["--low-latency"] if low else [])
                through += client_result(run.json_out(), "through netcond")["rtts"]
                runs.append(run)
        d50, n50 = pct(direct, 50) * 1e6, pct(through, 50) * 1e6
        d99, n99 = pct(direct, 99) * 1e6, pct(through, 99) * 1e6
        late = sum(r.late for r in runs)
        t.add(f"{label}: added RTT p50", f"{n50 - d50:.0f} us (direct {d50:.0f} us, netcond {n50:.0f} us; "
              f"{len(through)} samples, {late} packets released > 1 ms late)",
              "<= 100 us" if low else "(report)", ("PASS" if n50 - d50 <= 100 else "FAIL") if low else "INFO")
        t.add(f"{label}: added RTT p99", f"{n99 - d99:.0f} us (direct {d99:.0f} us, netcond {n99:.0f} us)",
              "(report)", "INFO")
    t.notes.append("9b: `bench.py client pingpong` (100 bytes, TCP_NODELAY, 50 warm-up exchanges, 1000 counted) to "
                   "the bench's echo server, run directly and as the command of `netcond run --engine packet` with "
                   "`down/up: {latency: 0ms}`, alternating, three times each; the judged pass holds "
                   "/dev/cpu_dma_latency at 0 in the bench for both paths and passes --low-latency to netcond.")


def packet_latency(h, t, srv):
    """RTT error through `down/up: {latency: 100ms}`: as the machine comes (reported, 100 round
    trips), then with --low-latency (judged, 200)."""
    prof = packet_profile(h, "pkt-d100", {"latency": "100ms"}, {"latency": "100ms"})
    for low, n in ((False, 100), (True, 200)):
        label = "9c. packet engine 100ms each way" + (", --low-latency" if low else ", machine defaults")
        argv = client_argv("pingpong", "--port", srv.echo, "--n", n, "--warmup", 1, "--deadline", n * 0.25 + 20)
        probe = TimerProbe(h)
        try:
            run = PacketRun(h, prof, argv, f"pkt-d100-{int(low)}", timeout=n * 0.25 + 40,
                            extra=["--low-latency"] if low else [])
        finally:
            floor = probe.finish()
        held = "--low-latency not in effect" not in run.err
        if low and not held:
            label += " (NOT in effect)"
        data = client_result(run.json_out(), "through netcond")
        ex = [(r - 0.2) * 1000 for r in data["rtts"]]
        judged = low
        # The endpoints' own share: the same ping-pong directly, idle 200 ms before each exchange as
        # through the link (a client and a server waking from an idle CPU; a real path has it too).
        own = None
        if low:
            try:
                paced = client_argv("pingpong", "--port", srv.echo, "--n", 100, "--warmup", 1, "--gap", 0.2,
                                    "--deadline", 60)
                own = [r * 1000 for r in client_result(client_direct(h, paced, "pp-direct-paced", 90), "direct")["rtts"]]
            except Exception as e:
                log(f"    9c: the direct control failed: {e}")

        def verdict(ok):
            return ("PASS" if ok else "FAIL") if judged else "INFO"
        p50, p99 = pct(ex, 50), pct(ex, 99)
        t.add(f"{label}: RTT-200ms p50", f"{p50:.3f} ms ({len(ex)} samples)",
              "<= 0.3 ms" if judged else "(report)", verdict(p50 <= 0.3))
        t.add(f"{label}: RTT-200ms p99", f"{p99:.3f} ms", "<= 1 ms" if judged else "(report)", verdict(p99 <= 1.0))
        t.add(f"{label}: RTT-200ms max / min", f"{max(ex):.3f} / {min(ex):.3f} ms", "min >= 0 ms",
              "PASS" if min(ex) >= 0 else "FAIL")
        if own:
            t.add(f"{label}: control, the same ping-pong directly, 200 ms idle before each exchange: RTT p50 / p99",
                  f"{pct(own, 50):.3f} / {pct(own, 99):.3f} ms ({len(own)} samples); RTT-200ms less it: "
                  f"p50 {p50 - pct(own, 50):.3f} ms", "(the endpoints' own wake-ups)", "INFO")
        slow = [x for x in ex if x > 10]
        t.add(f"{label}: netcond's summary; the client's TCP retransmissions; round trips over 10 ms late",
              f"{run.evidence()}; client retransmitted {data.get('client_retrans')} segments; "
              f"{len(slow)} round trips > 10 ms late" + (f" (worst {max(slow):.0f} ms)" if slow else ""),
              "(evidence)", "INFO")
        if floor:
            t.add(f"{label}: control, 2 x 100ms sleeps in Python at the same time: oversleep p50 / p99 / max",
                  f"{pct(floor, 50):.3f} / {pct(floor, 99):.3f} / {max(floor):.3f} ms ({len(floor)} samples)",
                  "(timer floor of this machine)", "INFO")
    t.notes.append("9c: `bench.py client pingpong` (100 bytes, one warm-up exchange not counted) as the command of "
                   "`netcond run --engine packet` with `down/up: {latency: 100ms}`; 100 round trips as the machine "
                   "comes, 200 with --low-latency (judged); RTT error = measured RTT - 200 ms; the control row runs the "
                   "same client directly with 200 ms idle before each exchange (what the endpoints' own wake-ups cost "
                   "without any link). Evidence row: the "
                   "client socket's TCP retransmissions (TCP_INFO tcpi_total_retrans); retransmissions while netcond's "
                   "summary says no packet lost mean packets vanished outside netcond's link model (the kernel drops "
                   "every queued packet when a netfilter hook is unregistered, e.g. another program deleting an nft "
                   "table with base chains); 'other NFQUEUE users' counts other queue owners seen during the run.")


def packet_rate(h, t, srv):
    name = "9d. packet engine rate"
    for rate_text, rate, total, skip in (("240kbit", 240e3, 25.0, 3.0), ("2Mbit", 2e6, 14.0, 2.0),
                                         ("50Mbit", 50e6, 14.0, 2.0)):
        label = f"{name} {rate_text} down"
        try:
            prof = packet_profile(h, f"pkt-bw{rate_text}", {"bandwidth": rate_text, "latency": "5ms", "queue": "1MB"},
                                  {"latency": "5ms"})
            argv = client_argv("download", "--port", srv.source, "--total", total, "--skip", skip)
            run = PacketRun(h, prof, argv, f"pkt-bw{rate_text}", timeout=total + 40)
            bps = client_result(run.json_out(), "download")["bps"]
            bits = bps * 8
            ratio = bits / (rate * PACKET_PAYLOAD_SHARE)
            t.add(f"{label}: goodput / (rate x 1448/1500)",
                  f"{bits / 1e3:.1f} kbit/s = {ratio:.3f} (from {skip:.0f} s to {total:.0f} s); {run.evidence()}",
                  "0.98-1.02", "PASS" if abs(ratio - 1) <= 0.02 else "FAIL")
        except Exception as e:
            t.error(label, e)
    t.notes.append("9d: `bench.py client download` from the bench's Python source (writes as fast as it can) as the "
                   "command of `netcond run --engine packet` with `down: {bandwidth: R, latency: 5ms, queue: 1MB}, "
                   "up: {latency: 5ms}`; goodput = payload bytes received from 3 s to 25 s (240kbit) or 2 s to 14 s "
                   "(2Mbit, 50Mbit). Expected: R x 1448/1500 = 0.9653 R (the MSS is clamped to 1460; with TCP "
                   "timestamps each 1,500-byte packet carries 1448 bytes of payload; the link charges the IP packet, "
                   "no layer-2 overhead).")


# 9e: UDP at 1,000 datagrams/s. Each datagram (UDP_SIZE bytes) starts with UDP_HEAD: sequence number,
# the client's send time, the echo server's receive and send times (CLOCK_MONOTONIC, ns, the same
# clock in every process of this host). Stamps are taken in user space, just before sendto and just
# after recvfrom: on loopback netcond holds both directions on input, after the kernel's receive
# stamp (SO_TIMESTAMPNS) is taken, so a kernel stamp would predate the emulated delay.
UDP_HEAD = struct.Struct("!Iqqq")
UDP_SIZE = 100
UDP_LATENCY_MS = 50.0  # each way
UDP_LOSS_UP, UDP_LOSS_DOWN = 1.0, 2.0  # percent; different so that a swapped direction shows


def delay_stats(ns_values, base_ms):
    """{min, p50, p99, max} of `ns_values` in ms, minus `base_ms`; None when empty."""
    if not ns_values:
        return None
    ms = sorted(v / 1e6 - base_ms for v in ns_values)
    return {"n": len(ms), "min": ms[0], "p50": pct(ms, 50), "p99": pct(ms, 99), "max": ms[-1]}


def udp_echo(n, deadline):
    """`bench.py udpecho`: the 9e server, outside netcond. Echoes each datagram with its receive and
    send times written in; counts what arrived (sequence numbers < n). Prints {"port": P}, then, when
    stdin closes (or after `deadline` seconds), one JSON object with the counts and the one-way up
    delays (its receive time - the client's send time)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    seen = bytearray(n)
    up_ns = []
    counts = {"received": 0, "duplicates": 0, "foreign": 0, "echoed": 0, "echo_errors": 0}
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, "udp")
    sel.register(sys.stdin, selectors.EVENT_READ, "stdin")
    end = time.monotonic() + deadline
    done = False
    while not done and time.monotonic() < end:
        for key, _ in sel.select(timeout=0.5):
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    done = True
                continue
            for _ in range(256):
                try:
                    data, addr = sock.recvfrom(2048)
                except (BlockingIOError, InterruptedError):
                    break
                now = time.monotonic_ns()
                if len(data) < UDP_HEAD.size:
                    counts["foreign"] += 1
                    continue
                seq, sent, _, _ = UDP_HEAD.unpack_from(data)
                if seq >= n:
                    counts["foreign"] += 1
                    continue
                if seen[seq]:
                    counts["duplicates"] += 1
                else:
                    seen[seq] = 1
                    counts["received"] += 1
                    up_ns.append(now - sent)
                reply = bytearray(data)
                UDP_HEAD.pack_into(reply, 0, seq, sent, now, time.monotonic_ns())
                try:
                    sock.sendto(reply, addr)
                    counts["echoed"] += 1
                except OSError:
                    counts["echo_errors"] += 1
    counts["up_ms"] = delay_stats(up_ns, 0.0)
    counts["closed_by_stdin"] = done
    print(json.dumps(counts), flush=True)


def udp_client(port, rate, seconds, drain, size=UDP_SIZE):
    """`bench.py client udp`: sends rate x seconds datagrams to 127.0.0.1:port at fixed times
    (start + i / rate; a late send is not made up by a burst beyond what the schedule owes), reads the
    echoes meanwhile and for `drain` seconds after the last send. Returns the counts, the round-trip
    times and the one-way down delays (receive time - the server's send time), in ms."""
    n = int(rate * seconds)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    payload = bytearray(max(size, UDP_HEAD.size))
    seen = bytearray(n)
    rtt_ns, down_ns = [], []
    counts = {"sent": 0, "send_errors": 0, "received": 0, "duplicates": 0, "foreign": 0}
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    start = time.monotonic()
    first_send = last_send = None
    behind_max = 0.0
    i = 0
    stop_at = start + seconds + drain + 5  # the hard end, even if sends fall behind
    while True:
        now = time.monotonic()
        if now > stop_at or (i >= n and last_send is not None and now > last_send + drain):
            break
        while i < n and start + i / rate <= now:
            behind_max = max(behind_max, now - (start + i / rate))
            UDP_HEAD.pack_into(payload, 0, i, time.monotonic_ns(), 0, 0)
            try:
                sock.send(payload)
                counts["sent"] += 1
            except OSError:
                counts["send_errors"] += 1
            last_send = time.monotonic()
            if first_send is None:
                first_send = last_send
            i += 1
            now = time.monotonic()
        wait = (start + i / rate - now) if i < n else (last_send + drain - now)
        if sel.select(timeout=max(0.0, min(wait, 0.1))):
            for _ in range(256):
                try:
                    data = sock.recv(2048)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:  # e.g. ECONNREFUSED from an ICMP port unreachable
                    counts["foreign"] += 1
                    break
                got = time.monotonic_ns()
                if len(data) < UDP_HEAD.size:
                    counts["foreign"] += 1
                    continue
                seq, sent, _, echoed = UDP_HEAD.unpack_from(data)
                if seq >= n or not sent or not echoed:
                    counts["foreign"] += 1
                    continue
                if seen[seq]:
                    counts["duplicates"] += 1
                    continue
                seen[seq] = 1
                counts["received"] += 1
                rtt_ns.append(got - sent)
                down_ns.append(got - echoed)
    sock.close()
    span = (last_send - first_send) if counts["sent"] > 1 else 0.0
    counts.update({
        "planned": n, "send_span_s": span, "send_rate": (counts["sent"] - 1) / span if span else 0.0,
        "send_behind_max_ms": behind_max * 1e3,
        "rtt_ms": delay_stats(rtt_ns, 0.0), "down_ms": delay_stats(down_ns, 0.0),
    })
    return counts


def read_json_line(proc, timeout):
    """The first line `proc` prints on stdout (a pipe), as JSON."""
    line = b""
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            if sel.select(timeout=0.5):
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                line += chunk
    finally:
        sel.close()
    if not line.endswith(b"\n"):
        raise RuntimeError(f"no start-up line in {timeout:.0f} s (got {line[:200]!r})")
    return json.loads(line.decode())


def packet_udp(h, t, srv):
    """UDP through the packet engine: `bench.py client udp` (1,000 datagrams/s for 30 s) as netcond's
    command, the bench's UDP echo server outside it. Loss up (what the server got), loss down (what
    came back of what the server echoed), one-way delays both ways and the round trip."""
    name = "9e. packet engine UDP"
    rate, seconds, drain = 1000, 30, 1.5
    n = rate * seconds
    lat = UDP_LATENCY_MS
    prof = packet_profile(h, "pkt-udp", {"latency": f"{lat:.0f}ms", "loss": f"{UDP_LOSS_DOWN:g}%"},
                          {"latency": f"{lat:.0f}ms", "loss": f"{UDP_LOSS_UP:g}%"})
    server = h.spawn([sys.executable, os.path.abspath(__file__), "udpecho", "--n", str(n),
                      "--deadline", str(seconds + 60)], "udp-echo-9e", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    run = None
    try:
        port = read_json_line(server, 10)["port"]
        argv = client_argv("udp", "--port", port, "--rate", rate, "--seconds", seconds, "--drain", drain)
        run = PacketRun(h, prof, argv, "pkt-udp", timeout=seconds + drain + 25)
        data = client_result(run.json_out(), "udp client")
        try:
            out, _ = server.communicate(timeout=10)  # closes its stdin: it prints its counts and exits
        except subprocess.TimeoutExpired:
            raise TimeoutError("the UDP echo server did not report in 10 s")
        lines = [l for l in out.decode(errors="replace").splitlines() if l.startswith("{\"received\"")]
        if not lines:
            raise RuntimeError(f"the UDP echo server printed no counts (exit {server.returncode})")
        sd = json.loads(lines[-1])
    finally:
        h.stop(server)
    sent, got_up, echoed, got_down = data["sent"], sd["received"], sd["echoed"], data["received"]
    if not sent or not echoed:
        raise RuntimeError(f"nothing crossed: sent {sent}, server received {got_up}, echoed {echoed}; "
                           f"{run.summary}")
    miss_up, miss_down = sent - got_up, echoed - got_down
    loss_up, loss_down = miss_up / sent * 100, miss_down / echoed * 100
    pace = (f"{sent} sent in {data['send_span_s']:.2f} s = {data['send_rate']:.0f}/s"
            + (f", {data['send_errors']} send errors" if data["send_errors"] else ""))
    for label, loss, ref, missed, of in (("up (client -> server)", loss_up, UDP_LOSS_UP, miss_up, "sent"),
                                         ("down (server echo -> client)", loss_down, UDP_LOSS_DOWN, miss_down,
                                          "echoed")):
        t.add(f"{name}: loss {label}, profile {ref:g} %",
              f"{loss:.2f} % ({missed} of {sent if of == 'sent' else echoed} {of}; {pace})",
              f"{ref:g} % +/- 0.5 pt", "PASS" if abs(loss - ref) <= 0.5 else "FAIL")
    rt_expected = (1 - (1 - UDP_LOSS_UP / 100) * (1 - UDP_LOSS_DOWN / 100)) * 100
    t.add(f"{name}: round-trip loss (echoes missing of sent)", f"{(sent - got_down) / sent * 100:.2f} % "
          f"(expected 1 - 0.99 x 0.98 = {rt_expected:.2f} %)", "(report)", "INFO")
    for label, st, base in ((f"one-way up - {lat:.0f}ms", sd.get("up_ms"), lat),
                            (f"one-way down - {lat:.0f}ms", data.get("down_ms"), lat),
                            (f"RTT - {2 * lat:.0f}ms", data.get("rtt_ms"), 2 * lat)):
        if not st:
            t.add(f"{name}: {label}", "no samples", "min >= 0 ms", "FAIL")
            continue
        t.add(f"{name}: {label} min (never early)", f"{st['min'] - base:.3f} ms ({st['n']} samples)",
              "min >= 0 ms", "PASS" if st["min"] - base >= 0 else "FAIL")
        t.add(f"{name}: {label} p50 / p99 / max",
              f"{st['p50'] - base:.3f} / {st['p99'] - base:.3f} / {st['max'] - base:.3f} ms", "(report)", "INFO")
    # netcond's own counts: every datagram offered up, every echo offered down, and its losses are
    # exactly what the two receivers missed (anything else vanished outside the emulated link).
    match = (run.up_packets == sent and run.down_packets == echoed and run.lost == miss_up + miss_down
             and not run.kernel_drops)
    t.add(f"{name}: netcond's summary vs the receivers",
          f"{run.evidence()}; receivers missed {miss_up} up + {miss_down} down = {miss_up + miss_down}; "
          f"{sent} sent, {echoed} echoed"
          + (f"; duplicates {sd['duplicates']} up / {data['duplicates']} down" if sd["duplicates"] or data["duplicates"]
             else "") + f"; sends up to {data['send_behind_max_ms']:.1f} ms behind schedule",
          "up = sent, down = echoed, lost = missed", "PASS" if match else "FAIL")
    t.notes.append(f"9e: `bench.py client udp` as the command of `netcond run --engine packet` with "
                   f"`down: {{latency: {lat:.0f}ms, loss: {UDP_LOSS_DOWN:g}%}}, up: {{latency: {lat:.0f}ms, loss: "
                   f"{UDP_LOSS_UP:g}%}}` (Bernoulli loss, no rate; the two losses differ so that a swapped direction "
                   f"shows): {n} datagrams of {UDP_SIZE} bytes at {rate}/s for {seconds} s (fixed send times) to the "
                   f"bench's UDP echo server (`bench.py udpecho`, outside netcond, 127.0.0.1), then {drain} s for the "
                   f"last echoes. Loss up = 1 - server received / client sent, against up's {UDP_LOSS_UP:g} %; loss "
                   f"down = 1 - client received / server echoed, against down's {UDP_LOSS_DOWN:g} % (the round trip "
                   f"compounds both, reported only). Delays from CLOCK_MONOTONIC stamps in the datagram, taken in user "
                   f"space just before send and just after receive (so they can only add time): one-way up = server "
                   f"receive - client send, one-way down = client receive - server send, RTT = client receive - "
                   f"client send; 'never early' = min >= the emulated delay. The last row checks netcond's summary "
                   f"line: up packets = datagrams sent, down packets = echoes sent, packets lost = what the two "
                   f"receivers missed.")


# 9f: the packet engine's loss fidelity: the kernel's own TCP under `netcond run --engine packet`
# against the kernel's own TCP through tcp_reference.py's emulator, measured in the same run with the
# same conditions, the same workload code (`bench.py tcpserve` and `bench.py client`) and the same
# seeds: the reference draws its losses from netcond's streams (`--netcond-draws`), so the pairs agree. The
# reference runs in a thread of its own, several instances at once (it uses no NFQUEUE); the packet
# engine's runs go one after another (one that ends flushes every NFQUEUE on the host).
FIDELITY_TOLERANCE = 0.10
FIDELITY_QUEUE = 1000  # packets, both sides: the reference's FIFO (5a's 1500KB is the same for the proxy)
FIDELITY_STEADY = {100: 30.0, 500: 45.0}  # seconds per steady cell (5a: 45 and 65), counted from FIDELITY_SKIP
FIDELITY_SKIP = 5.0
FIDELITY_STEADY_SEEDS = (201, 202, 203)  # both sides; the first alone where TCP is not loss-bound
FIDELITY_FRESH = {100: (40, 260.0), 500: (24, 420.0)}  # rtt: netcond downloads (a run and a seed each), seconds at most
FIDELITY_FRESH_SEED = 301
# Reference instances at once for the fresh cells: five at once on two cores beside netcond's runs
# slowed the reference's own packets (100 ms cell: 3.55 s five at once, 3.07 s alone).
FIDELITY_KERNEL_INSTANCES = 2
FIDELITY_AT_ONCE = 4  # reference instances at once for the steady and bufferbloat cells
FIDELITY_SOURCES = "127.87.0.0/16"  # the clients' local addresses on this host: one new address per connection
BLOAT = {"bandwidth": "2Mbit", "rate": 2.0, "rtt": 100, "queue": "64KB", "queue_bytes": 65536, "total": 22.0,
         "skip": 1.0}


def reference_script():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "tcp_reference.py")


def reference_run(h, name, args, timeout):
    """One tcp_reference.py (args after the script); its stdout, or an error with its stderr's end."""
    proc = h.spawn([sys.executable, reference_script(), *map(str, args)], name,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        h.stop(proc)
        raise TimeoutError(f"{name}: the reference did not finish in {timeout:.0f} s")
    finally:
        if proc.poll() is None:
            h.stop(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: exit {proc.returncode}: {err.decode(errors='replace')[-300:].strip()}")
    return out.decode(errors="replace")


def reference_leftovers(h, tags):
    """Removes (and notes) the namespaces of tcp_reference.py instances that could not remove their own."""
    try:
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return
    names = {line.split()[0] for line in listing.splitlines() if line.strip()}
    for tag in tags:
        for ns in (f"ncref-client-{tag}", f"ncref-server-{tag}"):
            if ns not in names:
                continue
            h.note(f"tcp_reference.py left network namespace {ns} (removed by the bench)")
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10).stdout
            for pid in pids.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def other_packet_engines():
    """Whether another packet engine (or any NFQUEUE user) is on this host now."""
    if nfqueue_users():
        return True
    try:
        tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "netcond_" in tables


def wait_quiet(limit=60.0):
    """Waits until no other packet engine has been on the host for 1 s (at most `limit` s); the wait."""
    started = time.monotonic()
    quiet_since = None
    while time.monotonic() - started < limit:
        now = time.monotonic()
        if other_packet_engines():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= 1.0:
            break
        time.sleep(0.2)
    return time.monotonic() - started


class Sources:
    """New local addresses in FIDELITY_SOURCES for 9f's clients on this host: the server's TCP keeps
    metrics (ssthresh, RTT) per peer address (tcp_no_metrics_save is 0 on the host), so a client
    reusing one would start where an earlier connection left off; the reference's namespaces save
    none. Flushed from the host's metrics at the start and the end."""

    def __init__(self):
        self.next = 1
        self.flush()

    def take(self, n):
        import ipaddress
        first = ipaddress.ip_network(FIDELITY_SOURCES)[self.next]
        self.next += n
        return str(first)

    @staticmethod
    def flush():
        try:
            subprocess.run(["ip", "tcp_metrics", "flush", FIDELITY_SOURCES], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass


def undisturbed_run(h, profile, argv, name, timeout, tries=3, seed=9):
    """A PacketRun after waiting for the host to be free of other packet engines; again (up to `tries`
    in all) when the kernel flushed packets from netcond's queue meanwhile (another program changed
    the firewall: loss the profile did not ask for). Returns (run, disturbed attempts)."""
    disturbed = 0
    while True:
        waited = wait_quiet()
        if waited > 2:
            log(f"    waited {waited:.0f} s for other packet engines on this host to end")
        run = PacketRun(h, profile, argv, name, seed=seed, timeout=timeout)
        if not run.vanished:
            return run, disturbed
        disturbed += 1
        log(f"    {name}: {run.vanished} packets flushed by another program's firewall change; "
            + ("again" if disturbed < tries else "keeping it"))
        if disturbed >= tries or h.remaining() < timeout + 60:
            return run, disturbed


def fidelity_profile(h, name, bandwidth, rtt, loss, queue):
    return write_profile(h, name, f"link:\n  bandwidth: {bandwidth}\n  latency: {rtt / 2:g}ms\n  loss: {loss}%\n"
                                  f"  queue: {queue}\n")


def paired_ratio(a, b):
    """sum(a) / sum(b) over pairs (a[i], b[i]) and the 95 % interval of that ratio (delta method on the
    pairs: the spread of a[i] - r b[i], which is small when the two sides drew the same losses)."""
    r = sum(a) / sum(b)
    if len(a) < 2:
        return r, r, r
    se = statistics.stdev([x - r * y for x, y in zip(a, b)]) / math.sqrt(len(a)) / statistics.mean(b)
    return r, r - 1.96 * se, r + 1.96 * se


def reference_json(output):
    """The JSON object a steady or bloat reference run printed last (its last line starting with "{")."""
    return json.loads([l for l in output.splitlines() if l.startswith("{")][-1])


def packet_loss_fidelity(h, t, srv):
    name = "9f. packet engine loss fidelity"
    target = f"within ±{FIDELITY_TOLERANCE * 100:.0f} % of the kernel's (tcp_reference.py, same run, same seeds)"
    steady_cells = [(rtt, loss, cc) for rtt in (100, 500) for loss in (0, 1, 5) for cc in ("bbr", "cubic")]

    def steady_seeds(c):  # a loss-bound cubic cell is a few sawtooth periods: several seeds, paired
        return FIDELITY_STEADY_SEEDS if c[2] == "cubic" and c[1] > 0 else FIDELITY_STEADY_SEEDS[:1]

    def fresh_seeds(c):
        return range(FIDELITY_FRESH_SEED, FIDELITY_FRESH_SEED + FIDELITY_FRESH[c[0]][0])

    # The reference's work, all of it started now in its own thread. Every lossy job draws its losses
    # from netcond's streams for the same seed (--netcond-draws): the two sides lose the same packets.
    ref, tags = {}, []
    stop = threading.Event()

    def ref_job(key, args, timeout):
        if stop.is_set():
            raise RuntimeError("stopped")
        tag = f"f{len(tags)}"
        tags.append(tag)
        return reference_run(h, f"ref9f-{'-'.join(map(str, key))}", [*args, "--tag", tag], timeout)

    def references():
        import concurrent.futures
        steady = {("bloat",): (["--mode", "bloat", "--rate", BLOAT["rate"], "--rtt", f"{BLOAT['rtt']}ms", "--loss", "0%",
                                "--queue-bytes", BLOAT["queue_bytes"], "--cc", "cubic", "--seconds", BLOAT["total"],
                                "--skip", BLOAT["skip"], "--seed", 201], BLOAT["total"] + 60)}
        for c in steady_cells:
            common = ["--mode", "steady", "--rtt", f"{c[0]}ms", "--loss", f"{c[1]}%", "--cc", c[2],
                      "--queue", FIDELITY_QUEUE, "--seconds", FIDELITY_STEADY[c[0]], "--skip", FIDELITY_SKIP]
            for seed in steady_seeds(c):
                steady[("steady", *c, seed)] = ([*common, "--seed", seed, "--netcond-draws"], FIDELITY_STEADY[c[0]] + 60)
            if c[2] == "bbr" and c[1] == 5:  # where the loss strikes matters when the link is full: informational
                steady[("steady-wire", *c)] = ([*common, "--seed", steady_seeds(c)[0]], FIDELITY_STEADY[c[0]] + 60)
        fresh = {("fresh", *c, seed): (["--rtt", f"{c[0]}ms", "--loss", f"{c[1]}%", "--cc", c[2], "--runs", 1,
                                        "--seed", seed, "--netcond-draws"], limit + 60)
                 for c, _, limit in KERNEL_CELLS for seed in fresh_seeds(c)}
        for jobs, at_once in ((steady, FIDELITY_AT_ONCE), (fresh, FIDELITY_KERNEL_INSTANCES)):
            with concurrent.futures.ThreadPoolExecutor(at_once) as pool:
                futures = {pool.submit(ref_job, key, *job): key for key, job in jobs.items()}
                for f in concurrent.futures.as_completed(futures):
                    try:
                        ref[futures[f]] = f.result()
                    except Exception as e:
                        ref[futures[f]] = e

    worker = threading.Thread(target=references, daemon=True)
    worker.start()
    servers, sources = {}, Sources()
    ours = {}  # key -> the measurement, or an exception
    completed = False
    try:
        for cc in ("cubic", "bbr"):
            proc = h.spawn([sys.executable, os.path.abspath(__file__), "tcpserve", "--cc", cc], f"tcpserve-{cc}",
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            servers[cc] = (proc, read_json_line(proc, 10))

        # (c) bufferbloat
        try:
            prof = fidelity_profile(h, "fid-bloat", BLOAT["bandwidth"], BLOAT["rtt"], 0, BLOAT["queue"])
            ports = servers["cubic"][1]
            argv = client_argv("bloat", "--port", ports["echo"], "--source-port", ports["source"], "--total",
                               BLOAT["total"], "--skip", BLOAT["skip"], "--src-base", sources.take(3))
            run, disturbed = undisturbed_run(h, prof, argv, "fid-bloat", BLOAT["total"] + 40)
            ours[("bloat",)] = (client_result(run.json_out(), "bloat"), run, disturbed)
        except Exception as e:
            ours[("bloat",)] = e

        # (a) steady goodput, the 12 cells of 5a, each seed paired with the reference's
        for c in steady_cells:
            seconds = FIDELITY_STEADY[c[0]]
            if h.remaining() < seconds + 60:
                ours[("steady", *c)] = RuntimeError("skipped: time budget")
                continue
            try:
                prof = fidelity_profile(h, f"fid-{c[0]}-{c[1]}", "12Mbit", c[0], c[1], f"{FIDELITY_QUEUE} packets")
                measured, disturbed = {}, 0
                for seed in steady_seeds(c):
                    argv = client_argv("download", "--port", servers[c[2]][1]["source"], "--total", seconds,
                                       "--skip", FIDELITY_SKIP, "--src-base", sources.take(1))
                    run, d = undisturbed_run(h, prof, argv, f"fid-steady-{c[0]}-{c[1]}-{c[2]}", seconds + 40, seed=seed)
                    disturbed += d
                    measured[seed] = (client_result(run.json_out(), "download")["bps"], run)
                    log(f"    steady {c} seed {seed}: {measured[seed][0] * 8 / 1e6:.2f} Mbit/s; {run.evidence()}")
                ours[("steady", *c)] = (measured, disturbed)
            except Exception as e:
                ours[("steady", *c)] = e

        # (b) 1 MB on a fresh connection, 5d's cells: a netcond run per download, each with its own seed
        # (the seeds the reference draws with), so that every download pairs with the reference's
        for c, _, limit in KERNEL_CELLS:
            want, allotted = FIDELITY_FRESH[c[0]]
            times, fails, runs, disturbed = {}, [], [], 0
            started = time.monotonic()
            try:
                prof = fidelity_profile(h, f"fid-{c[0]}-{c[1]}", "12Mbit", c[0], c[1], f"{FIDELITY_QUEUE} packets")
                for seed in fresh_seeds(c):
                    expect = LOSS_REF[c][1] * 1.6 + 5  # a download's usual length, start-up included
                    if time.monotonic() - started + expect > allotted or h.remaining() < expect + 120:
                        break
                    argv = client_argv("fresh", "--port", servers[c[2]][1]["fresh"], "--bytes", 1 << 20, "--runs", 1,
                                       "--timeout", limit, "--src-base", sources.take(1))
                    run, d = undisturbed_run(h, prof, argv, f"fid-fresh-{c[0]}-{c[1]}", limit + 30, seed=seed)
                    disturbed += d
                    if run.vanished:  # flushed packets in every attempt: this seed's download is not counted
                        continue
                    data = client_result(run.json_out(), "fresh")
                    runs.append(run)
                    if data["times"]:
                        times[seed] = data["times"][0]
                    fails += [f"seed {seed}: {e}" for e in data["errors"]]
                log(f"    fresh {c}: {len(times)} downloads, mean {statistics.mean(times.values()):.2f} s")
                ours[("fresh", *c)] = (times, fails, runs, disturbed)
            except Exception as e:
                ours[("fresh", *c)] = e
        completed = True
    finally:
        for proc, _ in servers.values():
            try:
                proc.stdin.close()
            except OSError:
                pass
            h.stop(proc)
        if completed:  # the reference's last cells may still be running
            worker.join(max(10.0, min(h.remaining() - 30, 1200.0)))
        if not completed or worker.is_alive():
            # Interrupted, or out of time: no new reference instance starts, the running ones are stopped
            # (SIGTERM: each removes its namespaces), and whatever they left is removed below.
            stop.set()
            if completed:
                h.note("9f: the reference did not finish within the time budget (its instances were stopped)")
            with h.lock:
                procs = list(h.procs)
            for proc in procs:
                if proc.poll() is None and reference_script() in map(str, proc.args):
                    h.stop(proc, wait=5)
            worker.join(15)
        reference_leftovers(h, tags)
        Sources.flush()

    def kernel(key):
        value = ref.get(key, RuntimeError("not measured (time budget)"))
        if isinstance(value, Exception):
            raise value
        return value

    def disturbed_text(disturbed):
        return f"; {disturbed} attempt(s) disturbed by another program's firewall change, run again" if disturbed else ""

    # (a) rows
    for c in steady_cells:
        label = f"{name}: steady goodput RTT {c[0]}ms loss {c[1]}% {c[2]}"
        try:
            mine = ours.get(("steady", *c), RuntimeError("not measured"))
            if isinstance(mine, Exception):
                raise mine
            measured, disturbed = mine
            seeds = sorted(measured)
            a = [measured[s][0] for s in seeds]
            b = [reference_json(kernel(("steady", *c, s)))["bps"] for s in seeds]
            r = sum(a) / sum(b)
            mbit = lambda v: f"{v * 8 / 1e6:.2f}"
            pairs = (f" (seed by seed, netcond/kernel: {', '.join(f'{mbit(x)}/{mbit(y)}' for x, y in zip(a, b))})"
                     if len(seeds) > 1 else "")
            wire = ""
            if ("steady-wire", *c) in ref and not isinstance(ref[("steady-wire", *c)], Exception):
                kw = reference_json(ref[("steady-wire", *c)])["bps"]
                wire = (f"; informational: the kernel with its losses on the wire (after the queue, its own draws) "
                        f"{mbit(kw)} Mbit/s")
            run = measured[seeds[len(seeds) // 2]][1]
            t.add(label, f"netcond {mbit(statistics.mean(a))} Mbit/s vs kernel {mbit(statistics.mean(b))} Mbit/s"
                         f"{' (means of the seeds)' if len(seeds) > 1 else ''} = {r:.2f}x{pairs}{wire}; "
                         f"{run.evidence()}{disturbed_text(disturbed)}", target,
                  "PASS" if within(sum(a), sum(b), FIDELITY_TOLERANCE) else "FAIL")
        except Exception as e:
            t.error(label, e)

    # (b) rows
    for c, _, _ in KERNEL_CELLS:
        label = f"{name}: 1 MB fresh connection RTT {c[0]}ms loss {c[1]}% {c[2]}, mean"
        try:
            mine = ours.get(("fresh", *c), RuntimeError("not measured"))
            if isinstance(mine, Exception):
                raise mine
            times, fails, runs, disturbed = mine
            kt, kfails = {}, []
            for seed in fresh_seeds(c):
                try:
                    output = kernel(("fresh", *c, seed))
                    got = download_times(output)
                    if not got:
                        raise RuntimeError(f"no complete download in the reference's output {output[-200:]!r}")
                    kt[seed] = got[0]
                except Exception as e:
                    kfails.append(f"seed {seed}: {e}")
            seeds = sorted(set(times) & set(kt))
            if len(seeds) < 10:
                raise RuntimeError(f"only {len(seeds)} downloads measured on both sides (netcond {len(times)}, "
                                   f"kernel {len(kt)}); failures: {(fails + kfails)[:2]}")
            a, b = [times[s] for s in seeds], [kt[s] for s in seeds]
            r, lo, hi = paired_ratio(a, b)
            close = sum(1 for x, y in zip(a, b) if abs(x - y) <= 0.05 * y)
            lost = sum(run.lost for run in runs)
            t.add(label, f"netcond {statistics.mean(a):.2f} s vs kernel {statistics.mean(b):.2f} s over the same "
                         f"{len(seeds)} seeds = {r:.2f}x (95 % interval {lo:.2f}-{hi:.2f}); {close} of {len(seeds)} "
                         f"downloads within 5 % of their seed's, correlation {statistics.correlation(a, b):.3f}; median "
                         f"{statistics.median(a):.2f} vs {statistics.median(b):.2f} s; netcond lost {lost} packets in all"
                         + (f"; {len(fails)} netcond downloads failed: {fails[:2]}" if fails else "")
                         + (f"; {len(kfails)} reference downloads failed: {kfails[:2]}" if kfails else "")
                         + disturbed_text(disturbed),
                  target, "PASS" if within(sum(a), sum(b), FIDELITY_TOLERANCE) and not fails else "FAIL")
            t.notes.append(f"9f samples, 1 MB RTT {c[0]}ms loss {c[1]}% {c[2]} (seed: netcond/kernel s): "
                           + " ".join(f"{s}: {times[s]:.2f}/{kt[s]:.2f}" for s in seeds))
        except Exception as e:
            t.error(label, e)

    # (c) rows
    try:
        mine = ours.get(("bloat",), RuntimeError("not measured"))
        if isinstance(mine, Exception):
            raise mine
        data, run, disturbed = mine
        kd = reference_json(kernel(("bloat",)))
        for what, f in (("idle RTT p50", lambda d: pct(d["idle"], 50)), ("loaded RTT p50", lambda d: pct(d["loaded"], 50)),
                        ("loaded RTT max", lambda d: max(d["loaded"]))):
            a, b = f(data) * 1000, f(kd) * 1000
            extra = ""
            if what == "loaded RTT max":
                bulk = lambda d: f"{d['bulk_bps'] * 8 / 1e3:.0f}" if d.get("bulk_bps") else "-"
                extra = (f"; bulk goodput {bulk(data)} vs {bulk(kd)} kbit/s; {run.evidence()}"
                         f"{disturbed_text(disturbed)}")
            t.add(f"{name}: bufferbloat (2Mbit, 50ms each way, queue 64KB, cubic) {what}",
                  f"netcond {a:.1f} ms vs kernel {b:.1f} ms = {a / b:.2f}x{extra}", target,
                  "PASS" if within(a, b, FIDELITY_TOLERANCE) else "FAIL")
    except Exception as e:
        t.error(f"{name}: bufferbloat", e)

    t.notes.append(
        "9f: the same workloads (`bench.py tcpserve`: a source, an echo and a 1 MB server whose sockets send with "
        "TCP_CONGESTION set to the cell's algorithm; `bench.py client download|fresh|bloat`) on both sides: (1) the "
        "client as the command of `netcond run --engine packet --seed S` with `link: {bandwidth: B, latency: RTT/2, "
        "loss: L, queue: Q}` (both directions), the server on 127.0.0.1 outside it; (2) scripts/bench.d/tcp_reference.py "
        "(the kernel's TCP between two namespaces, every packet carried by a Python emulator with the same rate, "
        "delay, FIFO and loss both ways), started at the same time in a thread of its own, "
        f"{FIDELITY_AT_ONCE} instances at once ({FIDELITY_KERNEL_INSTANCES} for the 1 MB cells). Paired: the "
        "reference runs with `--netcond-draws --seed S`, drawing each direction's losses from the stream netcond's "
        "link draws from under seed S (loss before the queue, netcond's place), so the two sides lose the same "
        "packets by their number and each netcond measure has the kernel's under the same losses beside it; where "
        "the two stacks' packets stay in step the pair agrees to the millisecond, and what differs is the "
        "emulators' timing. Steady: 12 Mbit/s, a "
        f"{FIDELITY_QUEUE}-packet queue on both sides, {FIDELITY_STEADY[100]:.0f} s at 100 ms and "
        f"{FIDELITY_STEADY[500]:.0f} s at 500 ms (shorter than 5a's 45/65 s), goodput from {FIDELITY_SKIP:.0f} s; "
        f"the loss-bound cubic cells take seeds {', '.join(map(str, FIDELITY_STEADY_SEEDS))} on both sides, "
        f"the others {FIDELITY_STEADY_SEEDS[0]}; judged on the means. 1 MB: one download per netcond run, seeds "
        f"{FIDELITY_FRESH_SEED} on, {FIDELITY_FRESH[100][0]} at 100 ms and {FIDELITY_FRESH[500][0]} at 500 ms (fewer if "
        f"their {FIDELITY_FRESH[100][1]:.0f}/{FIDELITY_FRESH[500][1]:.0f} s run out), the reference one download per "
        "seed; judged on the mean over the seeds both sides measured, with the interval of the paired ratio. "
        "Bufferbloat: 5c's measure without a proxy (20 idle ping-pongs of 100 bytes, a bulk download, 40 "
        "ping-pongs from 5 s into it), the reference's queue counted in bytes as netcond's. Every client connection "
        f"on this host takes a new local address in {FIDELITY_SOURCES} (flushed from the host's TCP metrics before "
        "and after), as the reference's namespaces keep no metrics. Packet-engine runs wait for the host to be "
        "free of other packet engines, and a run in which the kernel flushed packets from netcond's queue "
        "(another program deleted a netfilter table or chain: loss the profile did not ask for) is run again, "
        "at most twice.")


QUIC_SIZE = 200_000  # bytes: about 7 s of edge's 240 kbit/s down, plus the handshakes' round trips (0.84 s each)
QUIC_ROUNDS = 3
QUIC_TOLERANCE = 0.30


def quic_script():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "quic_load.py")


def packet_quic(h, t, srv):
    """A download of QUIC_SIZE bytes over QUIC (aioquic) and over TCP+TLS (Python's ssl), the client
    as the command of `netcond run --engine packet edge`, the server outside on 127.0.0.1;
    alternating, QUIC_ROUNDS of each; the medians compared."""
    name = "9g. packet engine QUIC"
    label = f"{name}: {QUIC_SIZE // 1000} KB over edge, QUIC (aioquic) vs TCP+TLS 1.3, median of {QUIC_ROUNDS} each"
    target = f"QUIC within ±{QUIC_TOLERANCE * 100:.0f} % of TCP+TLS"
    import importlib.util
    if importlib.util.find_spec("aioquic") is None:
        t.add(label, f"skipped: aioquic is not importable by {sys.executable} (`pip install aioquic`)", target, "SKIP")
        return
    cert, key = os.path.join(h.tmp, "quic-cert.pem"), os.path.join(h.tmp, "quic-key.pem")
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                           "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                           "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], capture_output=True, timeout=30)
    if made.returncode != 0:
        raise RuntimeError(f"openssl could not make a certificate: {made.stderr.decode(errors='replace')[-200:]}")
    server = h.spawn([sys.executable, quic_script(), "serve", "--cert", cert, "--key", key, "--size", str(QUIC_SIZE)],
                     "quic-server", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    results = {"quic": [], "tls": []}
    runs, disturbed = [], 0
    try:
        ports = read_json_line(server, 15)
        for rnd in range(QUIC_ROUNDS):
            for proto in ("quic", "tls"):
                if h.remaining() < 120:
                    raise RuntimeError("time budget")
                argv = [sys.executable, quic_script(), "get", proto, "--port", str(ports[proto]), "--cafile", cert,
                        "--size", str(QUIC_SIZE), "--timeout", "90"]
                run, d = undisturbed_run(h, "edge", argv, f"pkt-{proto}", timeout=120)
                disturbed += d
                data = client_result(run.json_out(), proto)
                results[proto].append((data["seconds"], data["handshake"], run))
                runs.append(run)
                log(f"    {proto} round {rnd + 1}: {data['seconds']:.2f} s (handshake {data['handshake']:.2f} s); "
                    f"{run.evidence()}")
    finally:
        try:
            server.stdin.close()
        except OSError:
            pass
        h.stop(server)
    q = statistics.median(x[0] for x in results["quic"])
    k = statistics.median(x[0] for x in results["tls"])
    hq = statistics.median(x[1] for x in results["quic"])
    hk = statistics.median(x[1] for x in results["tls"])
    flushed = sum(1 for r in runs if r.vanished)
    t.add(label, f"QUIC {q:.2f} s (runs {', '.join(f'{x[0]:.2f}' for x in results['quic'])}; handshake {hq:.2f} s) vs "
                 f"TCP+TLS {k:.2f} s (runs {', '.join(f'{x[0]:.2f}' for x in results['tls'])}; TCP and TLS handshakes "
                 f"{hk:.2f} s) = {q / k:.2f}x; netcond lost {sum(r.lost for r in runs)} packets (full queue)"
                 + (f"; {disturbed} attempt(s) disturbed by another program's firewall change"
                    + (f", {flushed} of the kept runs too" if flushed else ", run again") if disturbed else ""),
          target, "PASS" if within(q, k, QUIC_TOLERANCE) else "FAIL")
    t.notes.append(f"9g: scripts/bench.d/quic_load.py: a server outside netcond on 127.0.0.1 answers \"GET\" with "
                   f"{QUIC_SIZE:,} bytes over QUIC (aioquic, one stream, ALPN \"bench\", cubic, 1200-byte datagrams) "
                   f"and over TCP + TLS 1.3 (Python ssl, TCP_CONGESTION cubic), the same self-signed EC certificate "
                   f"(openssl, CN and SAN localhost); the client, as the command of `netcond run --engine packet "
                   f"edge` (240/200 kbit/s, 400/440 ms, 64KB queues), verifies it and times a new connection from "
                   f"before the handshake to the last byte. QUIC and TCP+TLS alternate, {QUIC_ROUNDS} runs each; "
                   f"medians compared. QUIC sends its request after one round trip, TCP+TLS after two, so QUIC is "
                   f"expected about one round trip (0.84 s) faster.")


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
                                   deadline=time.monotonic() + a.deadline, stats=stats, gap=a.gap)
            print(json.dumps({"rtts": rtts, "first": first, "client_retrans": stats.get("retrans")}), flush=True)
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


def run(args):
    h = Harness(args)
    header = [
        "# netcond benchmark results",
        "",
        f"Command: `{args.command}`",
        "",
        f"Date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; host: {os.cpu_count()} CPUs, {os.uname().release}; "
        f"{args.describe}; load average at start {os.getloadavg()[0]:.2f}",
    ]
    t = Table(args.out, header)

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    srv = None
    try:
        try:
            srv = Servers(h)
        except Exception as e:
            t.error("test servers", e)
        items = [
            ("1. pass-through throughput", lambda: item_throughput(h, t)),
            ("2. latency accuracy", lambda: item_latency(h, t, srv)),
            ("3. bandwidth accuracy", lambda: item_bandwidth(h, t, srv)),
            ("4. proxy overhead", lambda: item_overhead(h, t, srv)),
            ("6. memory", lambda: item_memory(h, t, srv)),
            ("5c. bufferbloat", lambda: item_bufferbloat(h, t, srv)),
            ("5a. steady goodput", lambda: item_loss_steady(h, t, srv)),
            ("5b. 1 MB via HTTP proxy", lambda: item_loss_curl(h, t)),
            ("7. scenario start-up", lambda: item_scenario_startup(h, t)),
            ("8. control API work", lambda: item_control_stall(h, t, srv)),
            ("5d. 1 MB vs real Linux TCP", lambda: item_kernel_reference(h, t)),
            ("9. packet engine", lambda: item_packet(h, t, srv)),
            ("10. HTML report", lambda: html_report.item_html_report(h, t)),
            ("11. same profile, both engines", lambda: engines.item_engines(h, t, log)),
        ]
        only = set(args.only.split(",")) if args.only else None
        h.only = only
        for label, fn in items:
            # An item runs when its number is listed, or one of its sub-items (9e for 9).
            key = label.split(".")[0]
            if only and key not in only and not any(o[:-1] == key and o[-1:].isalpha() for o in only):
                continue
            if h.remaining() < 20:
                t.add(label, "skipped: time budget", "-", "SKIP")
                continue
            log(f"== {label} ({h.remaining():.0f} s of budget left, load average {os.getloadavg()[0]:.2f})")
            try:
                if srv is None and "throughput" not in label and "HTTP" not in label and "scenario" not in label \
                        and "Linux" not in label and "HTML" not in label and "engines" not in label:
                    raise RuntimeError("test servers did not start")
                fn()
            except KeyboardInterrupt:
                raise
            except Exception as e:
                traceback.print_exc(file=sys.stderr)
                t.error(label, e)
            t.save(h)
    except KeyboardInterrupt as e:
        t.add("run", f"interrupted ({e})", "-", "ERROR")
    finally:
        if srv:
            srv.close()
        h.stop_all()
        t.save(h)
    sys.stdout.write(t.render(h))
    sys.stdout.flush()


def main():
    if sys.argv[1:2] == ["client"]:  # item 9's clients, run as netcond's command: their own options
        client(sys.argv[2:])
        return
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("serve")
    ts = sub.add_parser("tcpserve")
    ts.add_argument("--bind", default="127.0.0.1")
    ts.add_argument("--port", type=int, default=0, help="the fresh port; source +1, echo +2 (0: free ports)")
    ts.add_argument("--cc", default="cubic")
    ts.add_argument("--size", type=int, default=1 << 20, help="bytes per fresh connection")
    up = sub.add_parser("udpecho")
    up.add_argument("--n", type=int, required=True, help="datagrams expected (sequence numbers 0..n-1)")
    up.add_argument("--deadline", type=float, default=120.0, help="seconds before it reports and exits anyway")
    tp = sub.add_parser("timers")
    tp.add_argument("--hop", type=float, default=0.1)
    r = sub.add_parser("run")
    r.add_argument("--binary", required=True)
    r.add_argument("--tmp", required=True)
    r.add_argument("--pidfile", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--command", default="scripts/bench")
    r.add_argument("--describe", default="")
    r.add_argument("--budget", type=float, default=780.0, help="seconds for all measurements")
    r.add_argument("--only", default="", help="comma-separated item numbers, e.g. 1,2,5c,9 (9a..9g: sub-items of 9)")
    args = ap.parse_args()
    if args.cmd == "timers":
        timers(args.hop)
    elif args.cmd == "udpecho":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            udp_echo(args.n, args.deadline)
        except KeyboardInterrupt:
            pass
    elif args.cmd == "tcpserve":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            tcp_serve(args.bind, args.port, args.cc, args.size)
        except KeyboardInterrupt:
            pass
    elif args.cmd == "serve":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            serve()
        except KeyboardInterrupt:
            pass
    else:
        run(args)


if __name__ == "__main__":
    main()
