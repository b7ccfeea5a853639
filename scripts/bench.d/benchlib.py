"""What the bench's items share: the process handling (Harness), the test servers' process
(Servers), one `netcond proxy` (Netcond), the clients (pingpong, download), the statistics (pct,
within), the table (Table), the timer probe (TimerProbe) and the start-up line of a child
(read_json_line). bench.py is the entry point; each item is a module of its own (item_*.py)."""
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

# The entry point, which the harness re-invokes for its child processes (serve, timers, tcpserve,
# udpecho, client).
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench.py")


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

    def __init__(self, h, name="servers", wrap=(), bind="127.0.0.1"):
        """`wrap`: a prefix to run it with (9b: `ip netns exec NS`), `bind` its address."""
        self.h = h
        self.proc = h.spawn([*wrap, sys.executable, BENCH, "serve", "--bind", bind], name,
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
        try:
            ports = json.loads(line.decode())
        except ValueError:
            self.h.stop(self.proc)
            raise RuntimeError(f"{name} did not start (printed {line[-200:]!r})")
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


def low_latency_mode(t, nc, low, what):
    """(held, label suffix) of a pass run with `--low-latency` (`low`) or as the machine comes; a
    judged pass whose hold is not in effect (no root) says so in the notes and is judged as is."""
    err = nc._read(".err")
    held = low and "--low-latency not in effect" not in err
    if low and not held:
        t.notes.append(f"{what}: --low-latency was NOT in effect, so the judged rows ran on the machine's "
                       "defaults (" + err.strip()[-200:] + ")")
    if low and held and "--low-latency cannot keep idle CPUs polling" in err:
        # Held, but this machine has no cpuidle driver: its idle CPUs halt anyway (netcond said so).
        t.notes.append(f"{what}: --low-latency was held but changes nothing here: the machine has no cpuidle "
                       "driver, so idle CPUs halted as without it; the judged rows carry the wake-ups it removes "
                       "elsewhere")
        return held, ", --low-latency (no cpuidle driver: idle CPUs halt)"
    return held, ", machine defaults" if not low else ", --low-latency" if held else ", --low-latency (NOT in effect)"


def cpuidle_driver():
    """The kernel's cpuidle driver (what /dev/cpu_dma_latency steers): its name, 'none', or '?'."""
    try:
        with open("/sys/devices/system/cpu/cpuidle/current_driver") as f:
            return f.read().strip() or "?"
    except OSError:
        return "?"


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


class TimerProbe:
    def __init__(self, h, hop=0.1):
        self.h = h
        self.proc = h.spawn([sys.executable, BENCH, "timers", "--hop", str(hop)], "timers",
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def finish(self):
        """Returns the oversleeps (ms) or []."""
        try:
            out, _ = self.proc.communicate(timeout=5)  # closes stdin first: the probe stops
            return json.loads(out.decode() or "[]")
        except Exception:
            self.h.stop(self.proc)
            return []


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
