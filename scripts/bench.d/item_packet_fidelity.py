"""Bench item 9f: the packet engine's loss fidelity, against the kernel's own TCP through
tcp_reference.py in the same run (its workloads are in workloads.py)."""
import math
import statistics
import subprocess
import sys
import threading
import time

from benchlib import BENCH, log, pct, read_json_line, within, write_profile
from packetlib import client_argv, client_result, undisturbed_run
from references import (KERNEL_CELLS, LOSS_REF, download_times, reference_json, reference_leftovers,
                        reference_run, reference_script)


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
# BBR under loss: the kernel's own goodput moves from run to run on the very same losses (500 ms, 5 %,
# seed 201, the reference alone twice on 2026-11-30: 17,677 and 32,980 packets down, ~4.8 and ~9 Mbit/s),
# so those cells take the reference this many times and netcond is judged against the kernel's spread.
FIDELITY_BBR_REPEATS = 3
FIDELITY_FRESH = {100: (40, 260.0), 500: (24, 420.0)}  # rtt: netcond downloads (a run and a seed each), seconds at most
FIDELITY_FRESH_SEED = 301
# Reference instances at once for the fresh cells: five at once on two cores beside netcond's runs
# slowed the reference's own packets (100 ms cell: 3.55 s five at once, 3.07 s alone).
FIDELITY_KERNEL_INSTANCES = 2
FIDELITY_AT_ONCE = 4  # reference instances at once for the steady and bufferbloat cells
FIDELITY_SOURCES = "127.87.0.0/16"  # the clients' local addresses on this host: one new address per connection
BLOAT = {"bandwidth": "2Mbit", "rate": 2.0, "rtt": 100, "queue": "64KB", "queue_bytes": 65536, "total": 22.0,
         "skip": 1.0}


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


def packet_loss_fidelity(h, t, srv):
    name = "9f. packet engine loss fidelity"
    target = f"within ±{FIDELITY_TOLERANCE * 100:.0f} % of the kernel's (tcp_reference.py, same run, same seeds)"
    steady_cells = [(rtt, loss, cc) for rtt in (100, 500) for loss in (0, 1, 5) for cc in ("bbr", "cubic")]

    def steady_seeds(c):  # a loss-bound cubic cell is a few sawtooth periods: several seeds, paired
        return FIDELITY_STEADY_SEEDS if c[2] == "cubic" and c[1] > 0 else FIDELITY_STEADY_SEEDS[:1]

    def fresh_seeds(c):
        return range(FIDELITY_FRESH_SEED, FIDELITY_FRESH_SEED + FIDELITY_FRESH[c[0]][0])

    def repeats(c):  # the reference's runs per seed: BBR's outcome under loss is the kernel's own lottery
        return FIDELITY_BBR_REPEATS if c[2] == "bbr" and c[1] > 0 else 1

    def steady_key(c, seed, run):
        return ("steady", *c, seed) if run == 0 else ("steady", *c, seed, run)

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
                for run in range(repeats(c)):
                    steady[steady_key(c, seed, run)] = ([*common, "--seed", seed, "--netcond-draws"],
                                                        FIDELITY_STEADY[c[0]] + 60)
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
            proc = h.spawn([sys.executable, BENCH, "tcpserve", "--cc", cc], f"tcpserve-{cc}",
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
            mbit = lambda v: f"{v * 8 / 1e6:.2f}"
            pairs = (f" (seed by seed, netcond/kernel: {', '.join(f'{mbit(x)}/{mbit(y)}' for x, y in zip(a, b))})"
                     if len(seeds) > 1 else "")
            # Repeated cells (one seed): the kernel's runs on the same losses; netcond passes inside their
            # spread (± the tolerance), and the row shows every run.
            runs = [b[0]]
            for run in range(1, repeats(c) if len(seeds) == 1 else 1):
                try:
                    runs.append(reference_json(kernel(steady_key(c, seeds[0], run)))["bps"])
                except Exception as e:
                    log(f"    9f: reference run {run + 1} of {c}: {e}")
            if len(runs) > 1:
                b = [statistics.mean(runs)]
                pairs = (f" (the kernel's {len(runs)} runs on the same losses: "
                         f"{', '.join(mbit(v) for v in runs)} Mbit/s; judged against their spread)")
            r = sum(a) / sum(b)
            inside = (min(runs) * (1 - FIDELITY_TOLERANCE) <= a[0] <= max(runs) * (1 + FIDELITY_TOLERANCE)
                      if len(runs) > 1 else within(sum(a), sum(b), FIDELITY_TOLERANCE))
            wire = ""
            if ("steady-wire", *c) in ref and not isinstance(ref[("steady-wire", *c)], Exception):
                kw = reference_json(ref[("steady-wire", *c)])["bps"]
                wire = (f"; informational: the kernel with its losses on the wire (after the queue, its own draws) "
                        f"{mbit(kw)} Mbit/s")
            run = measured[seeds[len(seeds) // 2]][1]
            t.add(label, f"netcond {mbit(statistics.mean(a))} Mbit/s vs kernel {mbit(statistics.mean(b))} Mbit/s"
                         f"{' (means of the seeds)' if len(seeds) > 1 else ''} = {r:.2f}x{pairs}{wire}; "
                         f"{run.evidence()}{disturbed_text(disturbed)}", target,
                  "PASS" if inside else "FAIL")
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
        f"the others {FIDELITY_STEADY_SEEDS[0]}; judged on the means. The lossy BBR cells take the reference "
        f"{FIDELITY_BBR_REPEATS} times on the same losses (the kernel's BBR itself lands far apart from run to run "
        "there) and pass inside the spread of those runs, ± the tolerance. 1 MB: one download per netcond run, seeds "
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
