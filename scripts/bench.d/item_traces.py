"""Bench item 12: a measured link replays its trace (trace-driven links, issue 26).

For shipped traces, a saturating download (a 16 MB queue behind the link, the built-in origin
sending as fast as the path takes) runs under each engine; the client stamps every read. An
independent calculation from the trace file alone (written here, not netcond's code) says when
each packet may reach the client: a step series' rate integrated over time (each part of a packet
at the rate of its moment), plus the delay of the moment it left, never overtaking the packet
before it; a mahimahi trace's opportunities, one 1,500-byte packet each, plus the latency. The
client's bytes per 100 ms window are compared with the bytes the calculation lets through in the
same window, after one clock offset between the client's clock and the link's is fitted (the
only free parameter). Target: each window within ±2 % (or one packet, where 2 % is less than one
packet: 100 ms of a 2 Mbit/s link is 17 packets), for 95 % of the windows.

The same mahimahi trace also runs through mahimahi's own mm-link (when it is built here:
scripts/build-mahimahi; NETCOND_BENCH_MM_LINK, /opt/mahimahi/bin or PATH), measured the same way,
inside a network namespace of the bench's own (mahimahilib.py; the host's IPv4 forwarding is not
touched); and a --pcap of the packet engine's download
through it, recorded by `netcond trace record`, must give back each second's capacity within ±5 %.

The client is trace_client.py (run as netcond's child, or inside mahimahi's shell)."""
import bisect
import math
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from mahimahilib import Namespace, mm_missing, mm_tool, nobody_python
from packetlib import packet_missing

WINDOW = 0.100
SKIP = 6.0          # seconds left out from the first byte: until the sender has filled the queue (HyStart leaves slow start early when the delay jumps)
SECONDS = 24.0      # of download per run
AFTER_LOSS = 0.5    # seconds after a row with loss left out: TCP repairs, the reader waits behind the hole
SEARCH = 4.0        # the link's zero is searched in [netcond started, + this]
WIRE = 1500
PAYLOAD = {"proxy": 1460, "packet": 1448}  # a full segment's payload: the model's MSS; the kernel's, with timestamps
TARGET, SHARE = 0.02, 0.95
CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_client.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- the trace files, read independently of netcond ------------------------------------------

RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def read_series(path):
    """(period seconds or None, [(t, bits/s, delay s, loss)]) from a step series (stepped only)."""
    period, rows = None, []
    for line in open(path):
        text = line.strip()
        if text.startswith("#"):
            m = re.match(r"#\s*repeat:\s*([\d.]+)\s*(ms|s)", text)
            if m:
                period = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
            if re.match(r"#\s*interpolate:\s*linear", text):
                raise ValueError("the calculation here steps; an interpolated series is not one of the bench's")
            continue
        if not text or text.startswith("t"):
            continue
        t, rate, delay, loss = [v.strip() for v in text.split(",")]
        m = re.match(r"([\d.]+)\s*([a-zA-Z]+)", rate)
        bits = float(m.group(1)) * RATE_UNITS[m.group(2).lower()]
        d = re.match(r"([\d.]+)\s*(ms|s)", delay)
        rows.append((float(t), bits, float(d.group(1)) / (1000 if d.group(2) == "ms" else 1), float(loss.rstrip("%")) / 100))
    return period, rows


def series_arrivals(path, until):
    """Arrival times (s, link clock) of back-to-back 1,500-byte packets through a step series
    from 0 to `until`: the capacity integrated row by row, then each row's delay, FIFO."""
    period, rows = read_series(path)
    out, carried, last = [], 0.0, 0.0  # bits of the next packet already sent
    need = WIRE * 8
    cycle = 0
    while True:
        base = cycle * period if period else 0.0
        for i, (t, rate, delay, loss) in enumerate(rows):
            start = base + t
            end = base + (rows[i + 1][0] if i + 1 < len(rows) else (period if period else until))
            if start >= until:
                return out
            moment = start
            while moment < end:
                left = need - carried
                done = moment + left / rate
                if done > end:
                    carried += (end - moment) * rate
                    break
                # Loss is drawn as packets arrive at the link; the deep queue keeps it busy meanwhile.
                arrival = max(done + delay, last)
                out.append(arrival)
                last = arrival
                carried, moment = 0.0, done
        if not period:
            return out
        cycle += 1


def mahimahi_from_series(path, out_path):
    """The series' rates as a mahimahi trace: an opportunity each time 1,500 bytes of capacity
    have accrued (written to out_path); returns the opportunity times in ms."""
    period, rows = read_series(path)
    times, bits = [], 0.0
    for i, (t, rate, _, _) in enumerate(rows):
        end = rows[i + 1][0] if i + 1 < len(rows) else period
        moment = t
        while True:
            left = WIRE * 8 - bits
            done = moment + left / rate
            if done > end:
                bits += (end - moment) * rate
                break
            times.append(int(done * 1000))
            bits, moment = 0.0, done
    times.append(int(period * 1000))  # the last line is the period
    with open(out_path, "w") as f:
        f.write("".join(f"{ms}\n" for ms in times))
    return times


def mahimahi_arrivals(times_ms, latency, until):
    period = times_ms[-1] / 1000
    out, cycle = [], 0
    while cycle * period < until:
        out += [cycle * period + ms / 1000 + latency for ms in times_ms if cycle * period + ms / 1000 < until]
        cycle += 1
    return sorted(out)


# --- the client -------------------------------------------------------------------------------

# --- the comparison ---------------------------------------------------------------------------

def compare(stamps, started, arrivals, payload, lossy):
    """Per-window errors after fitting the link's zero (seconds after `started`, the monotonic
    moment netcond was started). Returns (offset, [(window start, measured, expected)])."""
    times = [t / 1e9 for t, _ in stamps]
    cumulative, total = [], 0
    for _, n in stamps:
        total += n
        cumulative.append(total)

    def measured_in(a, b):
        i, j = bisect.bisect_left(times, a), bisect.bisect_left(times, b)
        return (cumulative[j - 1] if j else 0) - (cumulative[i - 1] if i else 0)

    first = times[0] + SKIP
    edges = [first + k * WINDOW for k in range(int((times[-1] - first) / WINDOW))]
    measured = [measured_in(a, a + WINDOW) for a in edges]

    def expected(offset):
        return [(bisect.bisect_left(arrivals, a + WINDOW - offset) - bisect.bisect_left(arrivals, a - offset)) * payload
                for a in edges]

    def cost(offset):
        return sum(abs(m - e) for m, e in zip(measured, expected(offset)))

    # Coarse (5 ms), then fine (0.1 ms) around the best.
    best = min((started + k * 0.005 for k in range(int(SEARCH / 0.005))), key=cost)
    best = min((best + k * 0.0001 for k in range(-50, 51)), key=cost)
    rows = []
    for a, m, e in zip(edges, measured, expected(best)):
        link_moment = a - best
        if any(lo - WINDOW <= link_moment < hi + AFTER_LOSS for lo, hi in lossy(link_moment)):
            continue
        rows.append((link_moment, m, e))
    return best - started, rows


def summarize(rows, payload):
    ok, errors = 0, []
    for _, m, e in rows:
        if e <= 0:
            continue
        error = abs(m - e) / e
        errors.append(error)
        if abs(m - e) <= max(TARGET * e, payload):
            ok += 1
    errors.sort()
    measured, expected = sum(m for _, m, _ in rows), sum(e for _, _, e in rows)
    pick = (lambda q: errors[min(len(errors) - 1, int(q * len(errors)))]) if errors else (lambda q: math.nan)
    return {"windows": len(rows), "share": ok / max(1, len(errors)), "p50": pick(0.5), "p95": pick(0.95),
            "max": errors[-1] if errors else math.nan, "total": measured / expected if expected else math.nan}


def run_one(h, engine, profile, arrivals, payload, lossy, log):
    out = os.path.join(h.tmp, f"trace-stamps-{engine}-{os.path.basename(profile)}.txt")
    argv = [h.binary, "run", "--engine", engine, "--seed", "5", profile, "--",
            sys.executable, CLIENT,
            "http://origin.netcond.test/bytes/2000000000", str(SECONDS), out]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=SECONDS + 60)
    if done.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"{engine}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    stamps = [tuple(map(int, line.split())) for line in open(out) if line.strip()]
    log(f"  {engine} {os.path.basename(profile)}: {len(stamps)} reads, {sum(n for _, n in stamps) / 1e6:.1f} MB")
    offset, rows = compare(stamps, started, arrivals, payload, lossy)
    with open(out.replace("trace-stamps-", "trace-windows-"), "w") as f:  # for a closer look: link moment, client's, trace's
        f.write("".join(f"{a:.3f} {m} {e}\n" for a, m, e in rows))
    return offset, summarize(rows, payload)


def serve_bulk(port, seconds):
    """A plain HTTP source on every address of its namespace (run inside the bench's own, where
    mm-link's shell reaches it at $MAHIMAHI_BASE): one connection, cubic (as the built-in origin
    sends under the profile's tcp: cubic), as fast as the path takes, until the client closes or
    `seconds` pass. Prints "ready" once it listens. `python3 item_traces.py serve-bulk PORT SECONDS`."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
        listener.bind(("0.0.0.0", port))
        listener.listen(1)
        listener.settimeout(seconds)
        print("ready", flush=True)
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(seconds)
            request = b""
            while b"\r\n\r\n" not in request and len(request) < 65536:
                more = connection.recv(4096)
                if not more:
                    return
                request += more
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2000000000\r\n\r\n")
            block, deadline = b"x" * 65536, time.monotonic() + seconds
            while time.monotonic() < deadline:
                connection.sendall(block)
    except OSError:
        pass
    finally:
        listener.close()


def run_mm_link(h, mm_link, times_ms, log):
    """The mahimahi-format trace through mm-link, the same client and the same comparison. mm-link
    runs as the user nobody (it refuses a real uid of 0) inside a network namespace of the bench's
    own (mahimahilib.Namespace: IPv4 forwarding on in it only, as mm-link requires; nothing leaves
    it), with the bulk source run in that namespace too; the host's settings are not touched."""
    folder = tempfile.mkdtemp(prefix="netcond-bench-mm-")
    port = 47000 + os.getpid() % 1000
    server = None
    try:
        os.chmod(folder, 0o755)
        trace = os.path.join(folder, "link.trace")
        with open(trace, "w") as f:
            f.write("".join(f"{ms}\n" for ms in times_ms))
        os.chmod(trace, 0o644)
        out = os.path.join(folder, "stamps.txt")
        subprocess.run(["chown", "nobody", folder], check=True)
        shutil.copy(CLIENT, os.path.join(folder, "trace_client.py"))
        os.chmod(os.path.join(folder, "trace_client.py"), 0o644)
        with Namespace(h, "12") as ns:
            server = h.spawn(ns.argv([sys.executable, os.path.abspath(__file__), "serve-bulk", str(port),
                                      str(SECONDS + 30)]), "mm-link-bulk-source", stdout=subprocess.PIPE)
            ready = select.select([server.stdout], [], [], 10)[0] and server.stdout.readline()
            if not ready or b"ready" not in ready:
                raise RuntimeError(f"the bulk source in namespace {ns.name} did not start")
            python = nobody_python()
            client = f'exec {python} {folder}/trace_client.py "http://$MAHIMAHI_BASE:{port}/bytes" {SECONDS} {out}'
            argv = ns.nobody([mm_link, trace, trace, "--downlink-queue=droptail", "--downlink-queue-args=packets=10000",
                              "--", "sh", "-c", client])
            started = time.monotonic()
            proc = h.spawn(argv, "mm-link", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                _, err = proc.communicate(timeout=SECONDS + 60)
            except subprocess.TimeoutExpired:
                h.stop(proc)
                raise TimeoutError(f"mm-link did not finish in {SECONDS + 60:.0f} s")
            h.stop(server)
            if proc.returncode != 0 or not os.path.exists(out):
                raise RuntimeError(f"mm-link: exit {proc.returncode}: {err.decode(errors='replace').strip()[-300:]}")
        stamps = [tuple(map(int, line.split())) for line in open(out) if line.strip()]
        log(f"  mm-link: {len(stamps)} reads, {sum(n for _, n in stamps) / 1e6:.1f} MB")
        offset, rows = compare(stamps, started, mahimahi_arrivals(times_ms, 0.0, SECONDS + SEARCH + 5), PAYLOAD["packet"], lambda m: [])
        return offset, summarize(rows, PAYLOAD["packet"])
    finally:
        if server is not None:
            h.stop(server)
        shutil.rmtree(folder, ignore_errors=True)


def add_row(t, label, engine, offset, s):
    t.add(f"12. trace replay: {label}, {engine}, bytes per 100 ms vs the trace",
          f"{s['share']:.1%} of {s['windows']} windows within ±2 % or 1 packet; error p50 {s['p50']:.2%}, "
          f"p95 {s['p95']:.2%}, max {s['max']:.1%}; all windows {s['total']:.4f} of the trace's; link zero "
          f"{offset * 1000:.0f} ms after start",
          f"≥{SHARE:.0%} of windows within ±2 % (or 1 packet)", "PASS" if s["share"] >= SHARE else "FAIL")


def round_trip(h, profile, times_ms, log):
    """A download through a known mahimahi trace under the packet engine with --pcap; `netcond
    trace record` turns the capture into a trace; per second of the run, the recorded trace's
    capacity against the known one's (one offset fitted, whole milliseconds). Returns
    (offset ms, [(second, recorded, known)])."""
    capture = os.path.join(h.tmp, "round-trip.pcap")
    prefix = os.path.join(h.tmp, "round-trip-recorded")
    for leftover in (capture, prefix + ".trace", prefix + ".yaml"):
        if os.path.exists(leftover):
            os.remove(leftover)
    out = os.path.join(h.tmp, "round-trip-stamps.txt")
    argv = [h.binary, "run", "--engine", "packet", "--seed", "5", "--pcap", capture, profile, "--",
            sys.executable, CLIENT, "http://origin.netcond.test/bytes/2000000000", str(SECONDS), out]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=SECONDS + 60)
    if done.returncode != 0:
        # The last line is netcond's error (a root warning may come before it).
        raise RuntimeError(f"run: exit {done.returncode}: {done.stderr.strip().splitlines()[-1][-300:] if done.stderr.strip() else ''}")
    recorded = subprocess.run([h.binary, "trace", "record", capture, "-o", prefix], capture_output=True, text=True, timeout=120)
    if recorded.returncode != 0:
        raise RuntimeError(f"trace record: exit {recorded.returncode}: {recorded.stderr.strip()[-300:]}")
    log("  " + "\n  ".join(recorded.stdout.splitlines()))
    lines = [int(v) for v in open(prefix + ".trace").read().split()]
    mine = lines[:-1] if len(lines) > 1 and lines[-1] == lines[-2] else lines  # the period line repeats the last
    period = times_ms[-1]
    known = [cycle * period + ms for cycle in range(int((SECONDS + SEARCH + 5) * 1000 / period) + 1) for ms in times_ms[:-1]]
    seconds = int(mine[-1] / 1000)

    def per_second(values, offset):
        counts = [0] * (seconds + 1)
        for ms in values:
            k = (ms - offset) // 1000
            if 0 <= k <= seconds:
                counts[k] += 1
        return counts

    mine_counts = per_second(mine, 0)
    first, last = int(SKIP), seconds - 1  # whole seconds only: the last one is cut
    known_ms = sorted(known)

    def cost(offset):
        counts = per_second([ms for ms in known_ms if ms >= offset], offset)
        return sum(abs(mine_counts[k] - counts[k]) for k in range(first, last))
    best = min(range(0, int(SEARCH * 1000), 5), key=cost)
    best = min(range(max(0, best - 5), best + 6), key=cost)
    known_counts = per_second([ms for ms in known_ms if ms >= best], best)
    return best, [(k, mine_counts[k], known_counts[k]) for k in range(first, last)]


def item_traces(h, t, log):
    name = "12. trace replay"
    missing = packet_missing()
    engines = ["proxy"] + ([] if missing else ["packet"])
    until = SECONDS + SEARCH + 5
    measured = os.path.join(ROOT, "Profiles", "measured")
    cases = []
    for label, csv in (("akamai-experience-noloss", "akamai/experience-noloss.csv"),
                       ("starlink (down)", "starlink/down.csv")):
        path = os.path.join(measured, csv)
        profile = os.path.join(h.tmp, f"trace-{os.path.basename(csv)}.yaml")
        with open(profile, "w") as f:
            f.write(f"name: bench-trace\ndown:\n  trace: {path}\n  queue: 16MB\nup:\n  latency: 10ms\n")
        period, rows = read_series(path)
        loss_rows = [(r[0], (rows[i + 1][0] if i + 1 < len(rows) else period)) for i, r in enumerate(rows) if r[3] > 0]

        def lossy(moment, period=period, loss_rows=loss_rows):
            base = math.floor(moment / period) * period if period else 0.0
            return [(base + lo, base + hi) for lo, hi in loss_rows]
        cases.append((label, profile, series_arrivals(path, until), lossy))
    # The same measured rates in mahimahi's format (opportunities), 20 ms one way.
    mm = os.path.join(h.tmp, "experience-good.trace")
    times = mahimahi_from_series(os.path.join(measured, "akamai/experience-good.csv"), mm)
    profile = os.path.join(h.tmp, "trace-mahimahi.yaml")
    with open(profile, "w") as f:
        f.write(f"name: bench-trace-mm\ndown:\n  trace: {mm}\n  latency: 20ms\n  queue: 16MB\nup:\n  latency: 10ms\n")
    cases.append(("akamai-experience-good as a mahimahi trace", profile, mahimahi_arrivals(times, 0.020, until), lambda m: []))

    for label, profile, arrivals, lossy in cases:
        for engine in engines:
            if h.remaining() < 60:
                t.add(f"{name}: {label}, {engine}", "skipped: time budget", "-", "SKIP")
                continue
            try:
                offset, s = run_one(h, engine, profile, arrivals, PAYLOAD[engine], lossy, log)
                add_row(t, label, f"{engine} engine", offset, s)
            except Exception as e:
                t.error(f"{name}: {label}, {engine}", e)
    if missing:
        t.add(f"{name}: packet engine", f"skipped: {missing}", "-", "SKIP")
    if not missing and h.remaining() >= 90:
        try:
            offset, seconds = round_trip(h, profile, times, log)
            worst = max(abs(m - k) / k for _, m, k in seconds if k)
            each = " ".join(f"{m / k:.3f}" for _, m, k in seconds if k)
            t.add(f"{name}: round trip, a --pcap of that download through the mahimahi trace recorded by netcond trace record",
                  f"per-second capacity, recorded / known, seconds {seconds[0][0]}-{seconds[-1][0]}: worst {worst:.2%} ({each}); "
                  f"offset {offset} ms", "each second within ±5 %", "PASS" if worst <= 0.05 else "FAIL")
        except Exception as e:
            t.error(f"{name}: round trip", e)
    # The peer: mahimahi's mm-link on the same mahimahi trace, measured the same way.
    mm_link = mm_tool("mm-link", "NETCOND_BENCH_MM_LINK")
    why_not = mm_missing(mm_link, "mm-link", "NETCOND_BENCH_MM_LINK")
    label = "akamai-experience-good as a mahimahi trace"
    if why_not:
        t.add(f"{name}: {label}, mahimahi's mm-link", f"skipped: {why_not}", "-", "SKIP")
    elif h.remaining() >= 60:
        try:
            offset, s = run_mm_link(h, mm_link, times, log)
            add_row(t, label, "mahimahi's mm-link", offset, s)
        except Exception as e:
            t.error(f"{name}: {label}, mahimahi's mm-link", e)
    t.notes.append("12: a saturating download (a 16 MB queue behind the link, the client's receive buffer 8 MB, so nothing is dropped) for 24 s; the client stamps every read. "
                   "The expected bytes per 100 ms come from the trace file alone (this bench's own reading of it: the "
                   "rate integrated, each row's delay, FIFO; a mahimahi trace's opportunities of 1,500 bytes), counted "
                   "in full segments' payload (1460 B in the proxy's model, 1448 B the kernel's with timestamps); one "
                   "clock offset is fitted; the first 6 s, and windows from a row with loss to 0.5 s after it (the client's reads then wait for TCP's repair, not for the link), are left out. "
                   "mahimahi's mm-link (built by scripts/build-mahimahi) runs as the user nobody inside a network "
                   "namespace of the bench's own (IPv4 forwarding on in it only, as mm-link requires; no route out; "
                   "removed after), its bulk source in that namespace; the host's ip_forward is not touched.")




if __name__ == "__main__":
    if sys.argv[1:2] == ["serve-bulk"] and len(sys.argv) == 4:  # mm-link's bulk source, in the bench's namespace
        serve_bulk(int(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit("usage: item_traces.py serve-bulk PORT SECONDS")
