#!/usr/bin/env python3
"""Real Linux TCP through a packet-level emulator on this machine: the reference the loss model is
judged against, measured here instead of taken on trust.

Two network namespaces, each with a TUN device; this process carries every IP packet from one to
the other with the link's conditions: a rate (serialisation, a FIFO queue of `--queue` packets, tail
drop), a one-way delay, and i.i.d. loss of whole packets in both directions. TUN without a virtio
header gets no GSO, so a "packet" is one MTU-sized IP packet, i.e. one TCP segment. A server in one
namespace sends with its congestion control set per socket, and the kernel's own congestion control
(cubic or bbr) does the rest. Three measures (`--mode`), each the same code as the bench's packet-engine
side (`bench.py tcpserve` in the server namespace, `bench.py client ...` in the client's):

  fresh   (default) N bytes on a fresh connection, timed from connect() to the last byte, `--runs`
          times one after another; prints "SECONDS BYTES" per run
  steady  one long download (`--seconds`), payload goodput from `--skip` s; prints {"bps": B/s}
  bloat   5c's bufferbloat measure: 20 idle ping-pongs (100 bytes), then a bulk download and,
          from 5 s into it, 40 more; prints {"idle": [s], "loaded": [s], "bulk_bps": B/s}

    sudo python3 scripts/bench.d/tcp_reference.py --rtt 100ms --loss 1% --cc cubic --runs 41
    sudo python3 scripts/bench.d/tcp_reference.py --mode steady --rtt 500ms --loss 5% --cc bbr --seconds 45
    sudo python3 scripts/bench.d/tcp_reference.py --mode bloat --rtt 100ms --loss 0% --rate 2 --queue-bytes 65536

With `--netcond-draws` each direction draws its losses from the stream netcond's packet link draws
from under the same `--seed` (and loses before the queue, as netcond does): a run of this script and
a `netcond run --engine packet --seed S` lose the same packets, by their number in each direction,
so the bench compares the two seed by seed and what is left of a difference is the emulators' timing.

Each instance has its own pair of namespaces; `--tag T` names them (ncref-client-T, ncref-server-T), so
several instances (with different `--seed`s) can run at once, as the bench's 5d does.

Needs root (namespaces, TUN). Everything it creates (two namespaces, their processes) is removed
on every exit path.
"""
import argparse
import collections
import ctypes
import fcntl
import heapq
import json
import os
import random
import select
import signal
import struct
import subprocess
import sys
import time

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench.py")  # the workloads (tcpserve, client)
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
CLIENT_ADDRESS, SERVER_ADDRESS = "10.77.0.1", "10.77.0.2"
PORT = 5201


def namespaces(tag):
    """The (client, server) namespace pair of one instance; several instances (distinct tags) can run
    at once, each with its own pair, devices and emulator."""
    suffix = f"-{tag}" if tag else ""
    return f"ncref-client{suffix}", f"ncref-server{suffix}"


libc = ctypes.CDLL("libc.so.6", use_errno=True)


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)


def open_tun(namespace, name):
    """A TUN device created inside `namespace` (the calling thread's namespace at TUNSETIFF)."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        setns(f"/run/netns/{namespace}")
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    finally:
        if libc.setns(home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back")
        os.close(home)
    return fd


def parse_span(text):
    """`100ms`, `0.5s` or seconds as a number; a clear usage error otherwise."""
    value = text.strip()
    scale = 1.0
    if value.endswith("ms"):
        value, scale = value[:-2], 0.001
    elif value.endswith("s"):
        value = value[:-1]
    try:
        seconds = float(value) * scale
    except ValueError:
        seconds = -1
    if not 0 <= seconds <= 10:
        raise argparse.ArgumentTypeError(f"'{text}' is not a round trip; allowed: 0ms…10s, e.g. 100ms")
    return seconds


def parse_percent(text):
    """`1%` or `0.5%`; a clear usage error otherwise."""
    try:
        fraction = float(text.strip().rstrip("%")) / 100
    except ValueError:
        fraction = -1
    if not 0 <= fraction < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a loss rate; allowed: 0%…99%, e.g. 1%")
    return fraction


MASK64 = (1 << 64) - 1
NETCOND_LINK_LABEL = 0x5041434B  # netcond's packet engine derives each direction's link seed with it


def splitmix64(state):
    """(the next state, its output): netcond's seed expander."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def derive_seed(seed, *labels):
    """netcond's SeedDeriver.derive: an independent seed from a run seed and a path of labels."""
    _, value = splitmix64(seed & MASK64)
    for label in labels:
        _, value = splitmix64(value ^ ((label * 0x9E3779B97F4A7C15) & MASK64))
    return value


def rotate_left(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK64


class NetcondRandom:
    """netcond's SeededRandom (xoshiro256** seeded through SplitMix64), with random.Random's
    `random()`: the same uniform values netcond's `chance(p)` compares with p."""

    def __init__(self, seed):
        state, self.s = seed & MASK64, []
        for _ in range(4):
            state, out = splitmix64(state)
            self.s.append(out)

    def next(self):
        s0, s1, s2, s3 = self.s
        result = (rotate_left((s1 * 5) & MASK64, 7) * 9) & MASK64
        t = (s1 << 17) & MASK64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        self.s = [s0, s1, s2, rotate_left(s3, 45)]
        return result

    def random(self):
        return (self.next() >> 11) * 2.0 ** -53


def netcond_loss_streams(seed):
    """The streams netcond's packet link draws its loss decisions from under `--seed seed`, (up,
    down): PacketEngine seeds direction d's link with derive(seed, label, d), and the link's loss
    process with that plus one."""
    return tuple(NetcondRandom((derive_seed(seed, NETCOND_LINK_LABEL, d) + 1) & MASK64) for d in (0, 1))


class Link:
    """One direction: FIFO queue at `rate`, then `delay`; loss of whole packets with probability `loss`.
    The queue holds `queue` packets, or `queue_bytes` bytes when given (a packet is admitted while
    the bytes waiting plus its own fit, or when nothing waits); a packet counts from its arrival until
    it has left the link. Loss strikes after the link (on the wire: a lost packet has used its link
    time), or before the queue with `loss_first` (as netem, and netcond's packet link, do)."""

    def __init__(self, rate_bps, delay, loss, queue, rng, queue_bytes=None, loss_first=False):
        self.rate = rate_bps
        self.delay = delay
        self.loss = loss
        self.queue = queue
        self.queue_bytes = queue_bytes
        self.loss_first = loss_first
        self.rng = rng
        self.free_at = 0.0
        self.queued = collections.deque()  # (departure time, bytes) of the packets still ahead
        self.queued_bytes = 0
        self.lost = 0
        self.dropped = 0
        self.sent = 0

    def admit(self, now, size):
        """When the packet arrives at the far end, or None when it is lost or dropped."""
        if self.loss_first and self.loss > 0 and self.rng.random() < self.loss:
            self.lost += 1
            return None
        while self.queued and self.queued[0][0] <= now:
            self.queued_bytes -= self.queued.popleft()[1]
        if self.queue_bytes is not None:
            full = bool(self.queued) and self.queued_bytes + size > self.queue_bytes
        else:
            full = len(self.queued) >= self.queue
        if full:
            self.dropped += 1
            return None
        departure = max(now, self.free_at) + size * 8 / self.rate
        self.free_at = departure
        self.queued.append((departure, size))
        self.queued_bytes += size
        self.sent += 1
        if not self.loss_first and self.loss > 0 and self.rng.random() < self.loss:
            self.lost += 1
            return None
        return departure + self.delay


def emulate(fd_client, fd_server, down, up, stop_fd):
    """Carries packets until `stop_fd` becomes readable."""
    pending = []  # (time, seq, fd, packet)
    seq = 0
    while True:
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, out, packet = heapq.heappop(pending)
            try:
                os.write(out, packet)
            except OSError:
                pass
        # select(), not poll(): its time-out has microseconds, where poll() rounds up to the next
        # millisecond, and every packet would leave up to 1 ms late (2 % of a 100 ms round trip).
        timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else 1.0
        for fd in select.select([fd_client, fd_server, stop_fd], [], [], timeout)[0]:
            if fd == stop_fd:
                return
            for _ in range(64):
                try:
                    packet = os.read(fd, 65536)
                except BlockingIOError:
                    break
                link, out = (up, fd_server) if fd == fd_client else (down, fd_client)
                arrival = link.admit(time.monotonic(), len(packet))
                if arrival is not None:
                    seq += 1
                    heapq.heappush(pending, (arrival, seq, out, packet))


def read_line(pipe, timeout):
    """The first line a child prints (its ports), or an error after `timeout` s."""
    line = b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([pipe], [], [], left)[0]:
            raise RuntimeError(f"no start-up line in {timeout:.0f} s (got {line[:200]!r})")
        chunk = os.read(pipe.fileno(), 4096)
        if not chunk:
            raise RuntimeError(f"the server exited before it listened (got {line[:200]!r})")
        line += chunk
    return line.decode()


def client_argv(args, ports):
    """The command the client namespace runs for `args.mode`."""
    common = [sys.executable, BENCH, "client"]
    if args.mode == "fresh":
        return common + ["fresh", "--host", SERVER_ADDRESS, "--port", str(ports["fresh"]), "--bytes", str(args.size),
                         "--runs", str(args.runs), "--timeout", "120"]
    if args.mode == "steady":
        return common + ["download", "--host", SERVER_ADDRESS, "--port", str(ports["source"]),
                         "--total", str(args.seconds), "--skip", str(args.skip)]
    return common + ["bloat", "--host", SERVER_ADDRESS, "--port", str(ports["echo"]),
                     "--source-port", str(ports["source"]), "--total", str(args.seconds), "--skip", str(args.skip)]


def cleanup(pair):
    for namespace in pair:
        pids = sh("ip", "netns", "pids", namespace, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", namespace, check=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt", type=parse_span, default="100ms")
    parser.add_argument("--loss", type=parse_percent, default="1%", help="per packet, each direction")
    parser.add_argument("--rate", type=float, default=12.0, help="Mbit/s, each direction")
    parser.add_argument("--mode", choices=["fresh", "steady", "bloat"], default="fresh")
    parser.add_argument("--queue", type=int, default=1000, help="packets")
    parser.add_argument("--queue-bytes", type=int, default=None, help="a queue of this many bytes instead of --queue packets")
    parser.add_argument("--loss-first", action="store_true",
                        help="lose packets before the queue (netem's and netcond's place) rather than after the link")
    parser.add_argument("--seconds", type=float, default=30.0, help="steady, bloat: the download's length")
    parser.add_argument("--skip", type=float, default=5.0, help="steady, bloat: goodput counted from here")
    parser.add_argument("--cc", default="cubic", choices=["cubic", "bbr", "reno"])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--netcond-draws", action="store_true",
                        help="each direction's loss decisions from the stream netcond's packet link draws from under "
                             "the same --seed (implies --loss-first, netcond's place): a run of each with one seed "
                             "loses the same packets by their number in each direction, so the two pair up seed by seed")
    parser.add_argument("--tag", default="", help="names this instance's namespaces, so several can run at once")
    args = parser.parse_args()
    if args.tag and not args.tag.isalnum():
        parser.error(f"--tag '{args.tag}': letters and digits only")
    client_ns, server_ns = pair = namespaces(args.tag)
    rtt, loss = args.rtt, args.loss
    if os.geteuid() != 0:
        sys.exit("tcp_reference: needs root (network namespaces, TUN devices)")
    # A TERM (the bench stopping it) unwinds through `finally`: namespaces and processes go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    cleanup(pair)
    server = None
    stop_r, stop_w = os.pipe()
    fds = []
    try:
        for namespace in pair:
            sh("ip", "netns", "add", namespace)
            sh("ip", "-n", namespace, "link", "set", "lo", "up")
            # Each connection starts fresh: no ssthresh or RTT cached from the one before.
            sh("ip", "netns", "exec", namespace, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1")
        fd_client = open_tun(client_ns, "nctun")
        fd_server = open_tun(server_ns, "nctun")
        fds = [fd_client, fd_server]
        for namespace, (local, peer) in ((client_ns, (CLIENT_ADDRESS, SERVER_ADDRESS)),
                                         (server_ns, (SERVER_ADDRESS, CLIENT_ADDRESS))):
            sh("ip", "-n", namespace, "addr", "add", local, "peer", peer, "dev", "nctun")
            sh("ip", "-n", namespace, "link", "set", "nctun", "up", "mtu", "1500")
        if args.netcond_draws:
            args.loss_first = True
            rng_up, rng_down = netcond_loss_streams(args.seed)
        else:
            rng_up = rng_down = random.Random(args.seed)
        down = Link(args.rate * 1e6, rtt / 2, loss, args.queue, rng_down, args.queue_bytes, args.loss_first)
        up = Link(args.rate * 1e6, rtt / 2, loss, args.queue, rng_up, args.queue_bytes, args.loss_first)
        server = subprocess.Popen(["ip", "netns", "exec", server_ns, sys.executable, BENCH, "tcpserve",
                                   "--bind", SERVER_ADDRESS, "--port", str(PORT), "--cc", args.cc, "--size", str(args.size)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        ports = json.loads(read_line(server.stdout, 15))
        argv = ["ip", "netns", "exec", client_ns, *client_argv(args, ports)]
        sys.stdout.flush()
        sys.stderr.flush()
        child = os.fork()
        if child == 0:
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.close(stop_r)
                result = subprocess.run(argv, capture_output=True, text=True)
                sys.stdout.write(result.stdout)
                sys.stderr.write(result.stderr)
                sys.stdout.flush()
                sys.stderr.flush()
                os.write(stop_w, b"x")
            finally:
                os._exit(0)  # never the parent's clean-up: that is the parent's
        os.close(stop_w)  # the child's end: should it die, the emulator sees the pipe close and stops
        stop_w = None
        emulate(fd_client, fd_server, down, up, stop_r)
        os.waitpid(child, 0)
        queue = f"{args.queue_bytes} bytes" if args.queue_bytes is not None else f"{args.queue} packets"
        print(f"# {args.mode}: cc {args.cc}, rtt {rtt * 1000:g} ms, loss {loss * 100:g}% each way"
              f"{' (before the queue)' if args.loss_first else ''}, {args.rate} Mbit/s, queue {queue}: "
              f"{down.sent} packets down ({down.lost} lost, {down.dropped} dropped), "
              f"{up.sent} up ({up.lost} lost, {up.dropped} dropped)", file=sys.stderr)
    finally:
        if server:
            server.kill()
            server.wait()
        for fd in fds + [stop_r] + ([stop_w] if stop_w is not None else []):
            try:
                os.close(fd)
            except OSError:
                pass
        cleanup(pair)


if __name__ == "__main__":
    main()
