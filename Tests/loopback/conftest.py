"""Shared helpers for the real-client tests: they run the netcond binary the way users do."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

NETCOND = os.environ.get("NETCOND_BIN") or shutil.which("netcond") or ".build/release/netcond"


def origin_bytes(size, seed=0):
    """The built-in origin's /bytes/{size}?seed= content (SplitMix64 in counter mode, little-endian words)."""
    mask = (1 << 64) - 1
    out = bytearray()
    for w in range((size + 7) // 8):
        z = (seed + (w + 1) * 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out += z.to_bytes(8, "little")
    return bytes(out[:size])


def run(args, timeout=120, env=None, **kwargs):
    """Runs netcond with args; returns the CompletedProcess (text mode)."""
    full_env = dict(os.environ)
    full_env.pop("NETCOND_SEED", None)
    if env:
        full_env.update(env)
    return subprocess.run([NETCOND] + args, capture_output=True, text=True, timeout=timeout, env=full_env, **kwargs)


def run_listening(args_for, attempts=3, **kwargs):
    """Runs netcond with args_for(port), args in which it listens on `port` (a --forward), a loopback
    port free a moment ago; again with another when netcond could not bind it (exit 3: another job
    took it meanwhile). Returns (CompletedProcess, port)."""
    for attempt in range(attempts):
        port = free_port()
        result = run(args_for(port), **kwargs)
        if not (result.returncode == 3 and "already in use" in result.stderr) or attempt == attempts - 1:
            return result, port


def listening_port(process, pattern=r"proxy on http://127\.0\.0\.1:(\d+)"):
    """The port a netcond started with `--listen 127.0.0.1:0` bound, read from its start lines on
    stdout (a port picked beforehand can be taken by another job before netcond binds it)."""
    seen = ""
    for _ in range(20):
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        found = re.search(pattern, line)
        if found:
            return int(found.group(1))
    raise RuntimeError("netcond printed no listening address: " + seen + (process.stderr.read() if process.poll() is not None else ""))


def curl(proxy, *args, timeout=60):
    """curl through a running proxy (`-x`); returns the CompletedProcess (bytes)."""
    return subprocess.run(["curl", "-sS", "-x", proxy.url, *args], capture_output=True, timeout=timeout)


def status(proxy):
    """The proxy's `netcond ctl status --json`, parsed."""
    import json
    result = proxy.ctl("status", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_until(predicate, seconds=20):
    """Polls `predicate` every 0.1 s for at most `seconds`; True once it holds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def packet_engine_missing():
    """Why the packet engine cannot run here (None when it can): it needs root and nft/iptables."""
    if os.geteuid() != 0:
        return "the packet engine needs root (or CAP_NET_ADMIN); these tests run as root"
    for tool in ("nft", "iptables", "ip6tables"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            return f"{tool} is not installed"
    return None


def descriptors(pid):
    """A process's open descriptors: number -> what it points to."""
    found = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[name] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            pass  # closed between the listing and the read
    return found


def settled_descriptors(pid, seconds=10):
    """A process's descriptors once their number has not changed for 0.4 s (the readiness probes'
    connections are still being closed just after start, later on a loaded machine)."""
    snapshots = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        snapshots.append(descriptors(pid))
        if len(snapshots) >= 3 and len(snapshots[-1]) == len(snapshots[-2]) == len(snapshots[-3]):
            break
        time.sleep(0.2)
    return snapshots[-1]


def assert_descriptors_return(pid, before, slack=2, seconds=10):
    """Waits until the process holds at most `slack` descriptors more than `before` (a snapshot);
    fails naming the new ones and the process's TCP sockets, so a leak can be traced."""
    if wait_until(lambda: len(descriptors(pid)) <= len(before) + slack, seconds=seconds):
        return
    after = descriptors(pid)
    new = {name: target for name, target in after.items() if before.get(name) != target}
    sockets = subprocess.run(["ss", "-tanp"], capture_output=True, text=True).stdout
    mine = [line for line in sockets.splitlines() if f"pid={pid}," in line]
    raise AssertionError(f"{len(after)} descriptors open, {len(before)} before; new: {new}\n" + "\n".join(mine))


def read_to_eof(sock):
    """Everything a socket receives until the peer closes."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def stop_process(proc, sig=signal.SIGTERM, timeout=20):
    """Sends `sig` to a process a test started (if it still runs) and waits for it; kills it when it
    does not end within `timeout` s. Returns its exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def write_profile(directory, name, text):
    path = os.path.join(directory, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Sockets bound and never listening, held while the tests run: their ports stay closed.
_held_closed = []


def closed_port():
    """A loopback port nothing listens on, for as long as the tests run: a socket is bound to it and
    never listens (a SYN to it is refused, as to any closed port), so no other job can take it
    meanwhile and answer."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    _held_closed.append(held)
    return held.getsockname()[1]


@pytest.fixture
def tmp(tmp_path):
    return str(tmp_path)


class PortTaken(RuntimeError):
    """A port the fixture picked was taken before netcond could listen on it."""


class Proxy:
    """`netcond proxy` in the background; stopped (SIGINT) by the test that started it."""

    def __init__(self, profile, extra=(), descriptors=None):
        # `descriptors`: netcond's descriptor limit (RLIMIT_NOFILE, soft and hard), else this process's.
        self.descriptors = descriptors
        # A port free_port() found can be taken before netcond binds it (by another connection's
        # ephemeral source port): then the ports this fixture picked are picked again, up to 3 times.
        for attempt in range(3):
            try:
                return self._start(profile, extra)
            except PortTaken:
                if attempt == 2:
                    raise

    def _start(self, profile, extra):
        self.port = free_port()
        self.control_port = None
        # A forward written to listen on port 0 gets a port picked here (and picked again with the
        # others when it was taken): its port is in forward_ports, in the order given.
        self.forward_ports = []
        placed = []
        for flag, value in zip(("",) + tuple(extra), extra):
            if flag == "--forward" and value.split("=")[0].endswith(":0"):
                picked = free_port()
                value = value.split("=")[0][:-1] + f"{picked}=" + value.split("=", 1)[1]
            placed.append(value)
        extra = tuple(placed)
        for flag, value in zip(extra, extra[1:]):
            if flag == "--forward":
                self.forward_ports.append(int(value.split("=")[0].rsplit(":", 1)[1]))
        if "--control" not in extra and "--no-control" not in extra:
            self.control_port = free_port()
            extra = ("--control", f"127.0.0.1:{self.control_port}", *extra)
        self.process = subprocess.Popen(
            [NETCOND, "proxy", profile, "--listen", f"127.0.0.1:{self.port}", "--seed", "1", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=None if self.descriptors is None else self.limit_descriptors,
        )
        # Ready when every listener accepts: the proxy port, then each forward (bound after it), then
        # the control API (bound last).
        ports = [self.port] + [int(value.split("=")[0].rsplit(":", 1)[1])
                               for flag, value in zip(extra, extra[1:]) if flag == "--forward"]
        if self.control_port is not None:
            ports.append(self.control_port)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                while ports:
                    with socket.create_connection(("127.0.0.1", ports[0]), timeout=1):
                        ports.pop(0)
                return
            except OSError:
                if self.process.poll() is not None:
                    error = self.process.stderr.read()
                    ours = (f"127.0.0.1:{self.port}", f"127.0.0.1:{self.control_port}",
                            *(f"127.0.0.1:{port}" for port in self.forward_ports))
                    if "already in use" in error and any(address in error for address in ours):
                        raise PortTaken(error)
                    raise RuntimeError("netcond proxy exited: " + error)
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("netcond proxy did not start listening")

    def limit_descriptors(self):
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.descriptors, self.descriptors))

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    @property
    def control_url(self):
        return f"http://127.0.0.1:{self.control_port}"

    def ctl(self, *args, timeout=30):
        """`netcond ctl ARGS --control` this proxy's control API."""
        return run(["ctl", *args, "--control", self.control_url], timeout=timeout)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        out, err = self.process.communicate()
        return self.process.returncode, out, err


@pytest.fixture
def proxy_factory():
    started = []

    def start(profile, extra=(), descriptors=None):
        p = Proxy(profile, extra, descriptors)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, driven by selenium (both installed by scripts/test); skipped with
    the reason when missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (scripts/test installs it)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("chromium and chromedriver are not installed (scripts/test installs them: chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # A profile folder of the test's own, removed after: left to itself, chromium leaves an
    # org.chromium.Chromium.* folder in /tmp for each browser started.
    profile = tempfile.mkdtemp(prefix="netcond-chromium-")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                     f"--user-data-dir={profile}"):
        options.add_argument(argument)
    try:
        chrome = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))
        try:
            yield chrome
        finally:
            chrome.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(browser, name):
    """With NETCOND_SCREENSHOTS=FOLDER, saves what the browser shows there as NAME.png: the README's
    pictures are made this way, from the real pages (NETCOND_SCREENSHOTS=Docs/images scripts/test)."""
    folder = os.environ.get("NETCOND_SCREENSHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
        browser.save_screenshot(os.path.join(folder, name + ".png"))


class EchoServer:
    """A loopback TCP server that echoes everything and half-closes after the client does."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.port = self.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            threading.Thread(target=self.echo, args=(conn,), daemon=True).start()

    @staticmethod
    def echo(conn):
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    conn.shutdown(socket.SHUT_WR)
                    return
                conn.sendall(data)

    def close(self):
        self.socket.close()
