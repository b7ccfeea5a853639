"""What packet-engine runs have on the host: cgroups, chains in the shared nft table, iptables rules.

A run is known by its run id (`netcond-<id>`, `run_<id>_*`), never by a process id: it holds an
exclusive flock on its cgroup's folder for its life, which every PID namespace sees. These helpers
read a run's state the way netcond's own clean-up does: under the table's lock (a flock on the
cgroup hierarchy's root, which every run holds while it makes its cgroup or changes the shared
table), so another job's run is never seen half made or half removed.
"""
import contextlib
import fcntl
import os
import re
import subprocess
import time

CGROUP_ROOT = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"

# A run's id: 16 hex digits, the first a letter; an older netcond named its run after its process id.
RUN_ID = r"[0-9a-f]+"


@contextlib.contextmanager
def table_lock():
    """The lock every netcond run holds while it makes its cgroup or changes the shared table."""
    fd = os.open(CGROUP_ROOT if os.path.isdir(CGROUP_ROOT) else "/", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _held(run_id):
    """Whether a live run holds the cgroup netcond-<run_id> (its flock). Call under the table lock:
    a run takes its cgroup's lock under it, so this probe never meets a cgroup not yet locked."""
    try:
        fd = os.open(os.path.join(CGROUP_ROOT, "netcond-" + run_id), os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _dead(text):
    """True when the run named in `text` is gone; the shared table with no run in it is always left
    over. A run of an older netcond, named after its process id, is gone with its process."""
    if text.endswith("(no run in it)"):
        return True
    match = re.search(r"netcond[-_](" + RUN_ID + r")", text)
    if match is None:
        return False
    run_id = match.group(1)
    if run_id.isdigit():
        return not os.path.exists(f"/proc/{run_id}")
    return not _held(run_id)


def leftovers(include_live=False):
    """What packet-engine runs that are gone left: cgroups, nft chains and tables, iptables rules
    (with include_live, those of running ones too)."""
    with table_lock():
        return _leftovers(include_live)


def _leftovers(include_live):
    found = []
    if os.path.isdir(CGROUP_ROOT):
        found += [f"cgroup {name}" for name in os.listdir(CGROUP_ROOT) if name.startswith("netcond-")]
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    found += [f"nft {line}" for line in tables.splitlines() if "netcond_" in line]
    if "table inet netcond\n" in tables + "\n":
        shared = subprocess.run(["nft", "list", "table", "inet", "netcond"], capture_output=True, text=True).stdout
        runs = re.findall(r"chain (run_(" + RUN_ID + r")_\w+)", shared)
        found += [f"nft chain {chain} (netcond-{run_id})" for chain, run_id in runs]
        sets = re.findall(r"set (run_(" + RUN_ID + r")_\w+)", shared)
        found += [f"nft set {name} (netcond-{run_id})" for name, run_id in sets]
        runs += sets
        if not runs:
            found.append("nft table inet netcond (no run in it)")
    for tool in ("iptables", "ip6tables"):
        rules = subprocess.run([tool, "-w", "5", "-t", "mangle", "-S"], capture_output=True, text=True).stdout
        found += [f"{tool} {line}" for line in rules.splitlines() if "netcond-" in line]
    return found if include_live else [x for x in found if _dead(x)]


def leftovers_of(run_id, live=None):
    """What run `run_id` still has on the host, live or not (`live`: what leftovers(True) returned
    under a lock the caller holds)."""
    found = leftovers(include_live=True) if live is None else live
    return [x for x in found if re.search(rf"netcond-{run_id}(?![0-9a-z])", x)]


def run_id_of(pid, seconds=20):
    """The run id of the packet-engine netcond `pid`: the cgroup folder it holds open (its lock).
    Waits until the cage is made; None if it never is."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            for name in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{name}")
                except OSError:
                    continue
                if target.startswith(CGROUP_ROOT + "/netcond-"):
                    return target[len(CGROUP_ROOT + "/netcond-"):]
        except OSError:
            return None
        time.sleep(0.05)
    return None
