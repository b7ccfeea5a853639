"""Bench item 2: latency accuracy through a 100ms-each-way link, 1 and 100 connections."""
import os
import selectors
import socket
import statistics
import time

from benchlib import CPULatencyHold, Netcond, TimerProbe, log, low_latency_mode, pct, write_profile


def pingpong_many(port, conns, n, size=100, stagger=0.2, deadline=None, gap=0.0):
    """Ping-pong on `conns` connections at once from one thread (epoll): every connection sends
    `size` bytes, waits for the echo, records the RTT and sends again `gap` s later (at once by
    default), `n` times after one unrecorded warm-up exchange. Starts are staggered over `stagger`
    s so that replies do not all land at the same moment in this client, which would measure
    Python rather than netcond. Returns (rtts, firsts, errors)."""
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
                    if st["done"] == 0:
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
                if gap > 0:
                    waiting[s] = time.monotonic() + gap
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
            # The endpoints' own share (judged pass): the same ping-pong directly, idle 200 ms before
            # each exchange as through the link (a client and a server waking from an idle CPU; a real
            # path has it too), under the CPU idle policy --low-latency sets.
            own = []
            if judged:
                try:
                    with CPULatencyHold():
                        own, _, own_errors = pingpong_many(srv.echo, conns, 100 if conns == 1 else 30, gap=0.2,
                                                           deadline=time.monotonic() + 90)
                    own = [r * 1000 for r in own] if not own_errors else []
                    if own_errors:
                        log(f"    2: the direct control failed: {own_errors[:1]}")
                except OSError as e:
                    log(f"    2: the direct control failed: {e}")
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
            t.add(f"{label}: RTT-200ms p50", f"{p50:.3f} ms", "(report: with the endpoints' own)" if judged
                  else "(report)", "INFO")
            if judged and own:
                share = p50 - pct(own, 50)
                t.add(f"{label}: RTT-200ms p50 less the control's RTT p50 (netcond's share)",
                      f"{share:.3f} ms ({p50:.3f} - {pct(own, 50):.3f})", "<= 0.5 ms", verdict(share <= 0.5))
                t.add(f"{label}: control, the same ping-pong directly, 200 ms idle before each exchange: RTT p50 / p99",
                      f"{pct(own, 50):.3f} / {pct(own, 99):.3f} ms ({len(own)} samples)",
                      "(the endpoints' own wake-ups)", "INFO")
            elif judged:
                t.add(f"{label}: netcond's share of the RTT error", "no control (see the log)", "<= 0.5 ms", "FAIL")
            t.add(f"{label}: RTT-200ms p99", f"{p99:.3f} ms", "<= 1.5 ms" if judged else "(report)", verdict(p99 <= 1.5))
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
                           "(0.1-0.5 ms each on this VM, several per round trip). Judged: netcond's share, the "
                           "error's p50 less the control's RTT p50 (the same client and echo server directly, "
                           "each connection idle 200 ms before each exchange as through the link, "
                           "/dev/cpu_dma_latency held at 0 by the bench: what the endpoints' own wake-ups cost "
                           "without any link; 100 exchanges for 1 connection, 30 each for 100), and the error's p99.")
    finally:
        nc.stop()
