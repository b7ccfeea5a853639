"""Bench item 4: the round trip netcond adds with profile none."""
import time

from benchlib import Netcond, low_latency_mode, pct, pingpong


def item_overhead(h, t, srv):
    """Measured as the machine comes (reported), then with `--low-latency` (judged), as item 2: on a
    quiet VM each of the two extra wake-ups a proxy adds to a round trip (netcond's loop, once each
    way) pays an exit from a deep idle state, which no code in netcond can shorten."""
    for low in (False, True):
        overhead_pass(h, t, srv, low)


def overhead_pass(h, t, srv, low):
    nc = Netcond(h, "none", [srv.echo], seed=4, name="none-echo", extra=["--low-latency"] if low else [])
    held, _ = low_latency_mode(t, nc, low, "Overhead")
    name = "4. proxy overhead (profile none" + (
        ")" if not low else ", --low-latency)" if held else ", --low-latency NOT in effect)")
    try:
        direct, through = [], []
        deadline = time.monotonic() + 60
        for _ in range(3):
            direct += pingpong(srv.echo, 1000, warmup=50, deadline=deadline)[0]
            through += pingpong(nc.forwards[0], 1000, warmup=50, deadline=deadline)[0]
        d50, n50 = pct(direct, 50) * 1e6, pct(through, 50) * 1e6
        d99, n99 = pct(direct, 99) * 1e6, pct(through, 99) * 1e6
        added = n50 - d50
        t.add(f"{name}: added RTT p50", f"{added:.0f} us (direct {d50:.0f} us, netcond {n50:.0f} us)",
              "<= 100 us" if low else "(report)", ("PASS" if added <= 100 else "FAIL") if low else "INFO")
        t.add(f"{name}: added RTT p99", f"{n99 - d99:.0f} us (direct {d99:.0f} us, netcond {n99:.0f} us)",
              "(report)", "INFO")
    finally:
        nc.stop()
    if low:
        t.notes.append("Overhead: 100-byte ping-pong, 3 x 1000 round trips alternating direct and through a "
                       "forward of `netcond proxy none` (control API on); judged with `--low-latency`, which "
                       "holds /dev/cpu_dma_latency at 0 for every process of the round trip, as in item 2.")
