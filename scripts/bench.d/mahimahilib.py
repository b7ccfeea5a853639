"""What the bench's mahimahi columns share (9b: `mm-delay 0`; 12: `mm-link`): where mahimahi's
tools are, why they cannot run here, and a network namespace of the bench's own to run them in.

mahimahi refuses to start unless IPv4 forwarding is on where it starts (net.ipv4.ip_forward, a
setting of each network namespace). The bench never changes the host's: it creates a namespace
(`ip netns add netcond-bench-mm-PID-TAG`), brings its lo up and turns forwarding on inside it only.
The namespace has no other interface, so no route leaves it: mahimahi's own addresses (10.0.0.x, or
100.64.0.x), its TUN devices and its NAT rule live and die inside it, and the servers the clients
reach through mahimahi run inside it too. It is removed at the end (its processes killed first);
its name is recorded in TMP/netns so that scripts/bench's trap removes it if the harness is killed.
The host's forwarding setting is read before and after, and a change noted as an anomaly.

mahimahi's tools are setuid root and refuse a real uid of 0: they run as the user nobody
(runuser), with Debian's /usr/bin/python3 (an interpreter under /root is not nobody's) and copies
of the bench's scripts in a folder nobody can read (nobody_scripts)."""
import os
import shutil
import signal
import stat
import subprocess
import tempfile

PREFIX = "/opt/mahimahi"  # scripts/build-mahimahi's default
NS_PREFIX = "netcond-bench-mm-"
HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_HINT = "scripts/build-mahimahi SOURCE builds and installs it in /opt/mahimahi"


def mm_tool(name, env):
    """mahimahi's tool `name` (mm-delay, mm-link): $`env`, else /opt/mahimahi/bin, else PATH; or None."""
    for path in (os.environ.get(env), os.path.join(PREFIX, "bin", name), shutil.which(name)):
        if path and os.access(path, os.X_OK):
            return path
    return None


def nobody_python():
    """A python3 that the user nobody may run (not one under /root), or None."""
    for path in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if os.access(path, os.X_OK):
            return path
    return None


def mm_missing(tool, name, env):
    """Why mahimahi's `tool` (its path or None) cannot run here; None when it can."""
    if not tool:
        return f"no {name} ({BUILD_HINT}; or set {env}, or put it on PATH)"
    if os.geteuid() != 0:
        return "needs root (a network namespace of the bench's own, and mahimahi's tools run as nobody)"
    for helper in ("runuser", "ip"):
        if not shutil.which(helper):
            return f"no {helper} (mahimahi's tools run as nobody in a namespace of the bench's own)"
    st = os.stat(tool)
    if st.st_uid != 0 or not st.st_mode & stat.S_ISUID:
        return f"{tool} is not setuid root (mahimahi's make install makes it so; {BUILD_HINT})"
    if not nobody_python():
        return "no /usr/bin/python3 for the user nobody (mahimahi's shell runs the client as nobody)"
    return None


def host_forwarding():
    try:
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _run(argv, timeout=10):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


class Namespace:
    """A network namespace of the bench's own, with lo up and IPv4 forwarding on inside it only;
    no other interface, hence no route out. A context manager: removed on every exit path."""

    def __init__(self, h, tag):
        self.h = h
        self.name = f"{NS_PREFIX}{os.getpid()}-{tag}"
        self.host_forwarding = host_forwarding()
        with open(os.path.join(h.tmp, "netns"), "a") as f:  # for scripts/bench's trap
            f.write(f"{self.name}\n")
        if os.path.exists(f"/run/netns/{self.name}"):
            self.remove()
        done = _run(["ip", "netns", "add", self.name])
        if done.returncode != 0:
            raise RuntimeError(f"ip netns add {self.name}: {done.stderr.strip()[-200:]}")
        try:
            for argv in (["ip", "-n", self.name, "link", "set", "lo", "up"],
                         self.argv(["sysctl", "-qw", "net.ipv4.ip_forward=1"])):
                done = _run(argv)
                if done.returncode != 0:
                    raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()[-200:]}")
            links = _run(["ip", "-n", self.name, "-o", "link", "show"]).stdout.split("\n")
            names = [l.split(":")[1].strip() for l in links if l.strip()]
            if names != ["lo"]:
                raise RuntimeError(f"namespace {self.name} has interfaces {names}, not just lo")
        except Exception:
            self.remove()
            raise

    def argv(self, argv):
        """`argv` run inside the namespace (as root)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def nobody(self, argv):
        """`argv` run inside the namespace as the user nobody."""
        return self.argv(["runuser", "-u", "nobody", "--", *argv])

    def remove(self):
        try:
            pids = _run(["ip", "netns", "pids", self.name]).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            pids = []
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        try:
            _run(["ip", "netns", "del", self.name])
        except (OSError, subprocess.TimeoutExpired):
            pass
        if os.path.exists(f"/run/netns/{self.name}"):
            self.h.note(f"network namespace {self.name} could not be removed")
        if host_forwarding() != self.host_forwarding:
            self.h.note(f"the host's net.ipv4.ip_forward changed from {self.host_forwarding} to {host_forwarding()} "
                        f"while the bench's namespace {self.name} was up (not by the bench)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class NobodyScripts:
    """A copy of the bench's Python files in a folder the user nobody may read (0755, its files
    0644), removed at the end; .path is the folder."""

    def __init__(self, h, tag):
        self.path = tempfile.mkdtemp(prefix=f"netcond-bench-{tag}-")
        try:
            os.chmod(self.path, 0o755)
            for name in os.listdir(HERE):
                if name.endswith(".py"):
                    shutil.copy(os.path.join(HERE, name), os.path.join(self.path, name))
                    os.chmod(os.path.join(self.path, name), 0o644)
        except Exception:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
