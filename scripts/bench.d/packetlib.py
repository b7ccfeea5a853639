"""What item 9's sub-items share: one `netcond run --engine packet` (PacketRun) and what it may
leave on the host, the bench's own clients run as its command or directly, profiles with `down:`
and `up:`, and waiting for a host free of other packet engines."""
import json
import os
import re
import signal
import subprocess
import sys
import time

from benchlib import BENCH, log, write_profile


# ----------------------------------------------------------------------------------------------
# 9. the packet engine: `netcond run --engine packet PROFILE -- CMD` (the client runs as CMD)


CGROUP_ROOTS = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")  # hybrid hierarchy first, as netcond looks


def packet_missing():
    """Why the packet engine cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (cgroup, nft, iptables NFQUEUE)"
    for tool in ("nft", "iptables", "ip6tables"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin")):
            return f"{tool} is not installed"
    return None


def run_id_of(pid):
    """The run id of the `netcond run --engine packet` of process id `pid`: the cgroup folder
    netcond-<id> it holds open (its lock) while it runs; None before its cage is made or after."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        for root in CGROUP_ROOTS:
            if target.startswith(root + "/netcond-"):
                return target[len(root + "/netcond-"):]
    return None


def _mangle_rules(tool):
    try:
        return subprocess.run([tool, "-w", "5", "-t", "mangle", "-S"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def queues_of(run_id):
    """The NFQUEUE numbers the run's iptables rules send its packets to (empty once they are gone)."""
    found = set()
    for line in _mangle_rules("iptables").splitlines():
        words = [w.strip('"') for w in line.split()]
        if f"netcond-{run_id}" in words and "--queue-num" in words[:-1]:
            found.add(int(words[words.index("--queue-num") + 1]))
    return found


def packet_leftovers(run_id, remove=True):
    """What the `netcond run --engine packet` of run id `run_id` left on the host: its cgroup (and
    the processes still in it), its chains in the shared nft table, its iptables rules. Removed when
    `remove` (the next packet-engine run would remove them too); returns their descriptions.
    scripts/bench's trap does the same for the run ids in TMP/packet-runs."""
    found = []
    name = f"netcond-{run_id}"
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
    try:
        listing = subprocess.run(["nft", "-a", "list", "table", "inet", "netcond"], capture_output=True, text=True,
                                 timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        listing = ""
    chains, script, chain = [], "", ""
    for line in listing.splitlines():
        text = line.strip()
        if text.startswith("chain "):
            chain = text.split()[1]
            if chain.startswith(f"run_{run_id}_"):
                chains.append(chain)
        elif f'comment "{name}"' in text and "# handle " in text:
            script += f"delete rule inet netcond {chain} handle {text.rsplit('# handle ', 1)[1]}\n"
    found += [f"nft chain {c}" for c in chains]
    if remove and (script or chains):
        order = ("_output", "_input", "_captive", "_up", "_down")  # those that jump to others first
        script += "".join(f"delete chain inet netcond {c}\n" for suffix in order for c in chains if c.endswith(suffix))
        try:
            subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
    for tool in ("iptables", "ip6tables"):
        for line in _mangle_rules(tool).splitlines():
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


def threads_cpu_ns(pid):
    """{thread id: ns it has run} of process `pid`'s live threads (/proc/PID/task/*/schedstat: the
    scheduler's own nanoseconds, where /proc/PID/stat counts 10 ms ticks)."""
    found = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                found[int(tid)] = int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return found


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
        self.run_id = None  # the cage's name (netcond-<id>), read from netcond's descriptors once made
        ours = set()  # this run's NFQUEUE numbers (netcond picks them at random)
        self.cpu = None
        # Each thread's CPU as last sampled (ns): `cpu_threads`, to the nanosecond but blind to what a
        # thread ran after its last sample (a 50 ms poll); `cpu` counts every thread, in 10 ms ticks.
        threads = {}
        queues = {}  # NFQUEUE number -> peer port id, every queue seen while this run went on
        timed_out = False
        try:
            deadline = started + timeout
            while True:
                queues.update(nfqueue_users())
                if self.run_id is None:
                    self.run_id = run_id_of(proc.pid)
                    if self.run_id is not None:
                        with open(os.path.join(h.tmp, "packet-runs"), "a") as f:
                            f.write(f"{self.run_id}\n")
                if self.run_id is not None and not ours:
                    ours = queues_of(self.run_id)
                try:
                    exited = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    exited = True  # already reaped
                cpu = own_cpu_seconds(proc.pid)
                if cpu is not None:
                    self.cpu = cpu
                threads.update(threads_cpu_ns(proc.pid))
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
            left = packet_leftovers(self.run_id) if self.run_id is not None else []
        self.wall = time.monotonic() - started
        self.cpu_threads = sum(threads.values()) / 1e9 if threads else None
        self.rc = proc.returncode
        # Another NFQUEUE user (another packet engine) at the same time: its start and end change
        # the host's netfilter hooks, and the kernel drops every queued packet when a hook goes
        # (e.g. an nft table with base chains deleted), which netcond does not see as a loss.
        peers = {queues[q] for q in ours if q in queues}
        self.others = len({peer for peer in queues.values() if peer not in peers}) if peers \
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
    return [sys.executable, BENCH, "client", *map(str, args)]


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


def packet_profile(h, name, down, up):
    """A profile with `down:` and `up:` sections, each a dict of keys."""
    body = ""
    for section, keys in (("down", down), ("up", up)):
        body += f"{section}:\n" + "".join(f"  {k}: {v}\n" for k, v in keys.items())
    return write_profile(h, name, body)


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
