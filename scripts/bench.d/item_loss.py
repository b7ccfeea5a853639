"""Bench items 5a (steady goodput under loss), 5b (1 MB via the HTTP proxy) and 5d (1 MB, netcond
against real Linux TCP through tcp_reference.py)."""
import math
import os
import statistics
import subprocess
import sys
import time

from benchlib import Netcond, parallel_downloads, within, write_profile
from references import (KERNEL_CELLS, KERNEL_INSTANCES, KERNEL_REFERENCE, LOSS_REF, NETCOND_AT_ONCE,
                        NETCOND_SEEDS, download_times)


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
            # Real TCP on this machine takes twice the figure here: judged against it in 5d.
            t.add(label, f"{med:.2f} s (runs {spread}{extra}{bad})", f"{ref} s ±30 % (the issue's; judged in 5d)",
                  "INFO" if not fails else "FAIL")
            continue
        t.add(label, f"{med:.2f} s (runs {spread}{extra}{bad})", f"{ref} s ±30 %",
              "PASS" if within(med, ref, 0.3) and not fails else "FAIL")
    t.notes.append("1 MB time: `curl -s -o /dev/null -w '%{time_total}' -x http://127.0.0.1:P "
                   "http://origin.netcond.test/bytes/1MB`, five netcond processes (seeds 11-15) at once per cell, "
                   "median; cubic 5 % cells run last and are skipped if the time budget is short.")


def quartiles(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 4], statistics.median(ordered), ordered[(3 * len(ordered)) // 4]


def mean_interval(values):
    """The mean and the half-width of its 95 % confidence interval."""
    return statistics.mean(values), 1.96 * statistics.stdev(values) / math.sqrt(len(values))


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
