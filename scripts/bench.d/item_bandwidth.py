"""Bench item 3: bandwidth accuracy (goodput against the link rate), also with netcond stopped
now and then, and two downloads sharing a link."""
import os
import signal
import threading
import time

from benchlib import Netcond, download, parallel_downloads, write_profile


MSS, WIRE = 1460, 1500
PAYLOAD_SHARE = MSS / WIRE  # goodput share of a link rate with full segments


def item_bandwidth(h, t, srv):
    name = "3. bandwidth accuracy"
    total, skip = 11.0, 1.0
    for rate_text, rate in (("240kbit", 240e3), ("2Mbit", 2e6), ("50Mbit", 50e6)):
        try:
            prof = write_profile(h, f"bw{rate_text}", f"link:\n  bandwidth: {rate_text}\n  latency: 10ms\n")
            nc = Netcond(h, prof, [srv.source], seed=3, name=f"bw{rate_text}")
            try:
                res = {}
                download(nc.forwards[0], total, skip, res, "a")
                if isinstance(res["a"], Exception):
                    raise res["a"]
                bits = res["a"] * 8
                r_rate, r_pay = bits / rate, bits / (rate * PAYLOAD_SHARE)
                t.add(f"{name} {rate_text}: goodput / rate (payload ratio)",
                      f"{bits / 1e3:.1f} kbit/s = {r_rate:.3f} of rate, {r_pay:.3f} of rate x 1460/1500",
                      "payload ratio 0.97-1.03", "PASS" if abs(r_pay - 1) <= 0.03 else "FAIL")
            finally:
                nc.stop()
        except Exception as e:
            t.error(f"{name} {rate_text}", e)
    try:
        # The same 50 Mbit/s download while netcond's process is stopped for 40 ms twice a second, as
        # a loaded machine deschedules it: the emulated sender's buffer must keep the link busy.
        prof = write_profile(h, "bw50Mbit-held", "link:\n  bandwidth: 50Mbit\n  latency: 10ms\n")
        nc = Netcond(h, prof, [srv.source], seed=3, name="bw50Mbit-held")
        stop = threading.Event()
        freezer = threading.Thread(target=hold_up, args=(nc.pid, 0.040, 0.5, stop), daemon=True)
        try:
            res = {}
            freezer.start()
            download(nc.forwards[0], total, skip, res, "a")
            stop.set()
            freezer.join(5)
            if isinstance(res["a"], Exception):
                raise res["a"]
            r_pay = res["a"] * 8 / (50e6 * PAYLOAD_SHARE)
            t.add(f"{name} 50Mbit, netcond stopped 40 ms every 0.5 s: goodput / rate (payload ratio)",
                  f"{res['a'] * 8 / 1e3:.1f} kbit/s = {r_pay:.3f} of rate x 1460/1500",
                  "payload ratio 0.97-1.03", "PASS" if abs(r_pay - 1) <= 0.03 else "FAIL")
        finally:
            stop.set()
            freezer.join(5)
            os.kill(nc.pid, signal.SIGCONT)
            nc.stop()
    except Exception as e:
        t.error(f"{name} 50Mbit, netcond stopped", e)
    try:
        prof = write_profile(h, "bw2Mbit2", "link:\n  bandwidth: 2Mbit\n  latency: 10ms\n")
        nc = Netcond(h, prof, [srv.source], seed=3, name="bw2Mbit-par")
        try:
            res = parallel_downloads({"a": nc.forwards[0], "b": nc.forwards[0]}, total, skip)
            half = 2e6 * PAYLOAD_SHARE / 2
            for k in ("a", "b"):
                v = res[k]
                if isinstance(v, Exception):
                    t.error(f"{name} 2Mbit, 2 parallel downloads, #{k}", v)
                    continue
                ratio = v * 8 / half
                t.add(f"{name} 2Mbit, 2 parallel downloads, #{'1' if k == 'a' else '2'}: goodput / half",
                      f"{v * 8 / 1e3:.1f} kbit/s = {ratio:.3f} of half the payload rate",
                      "0.90-1.10", "PASS" if abs(ratio - 1) <= 0.10 else "FAIL")
        finally:
            nc.stop()
    except Exception as e:
        t.error(f"{name} 2Mbit parallel", e)
    t.notes.append("Bandwidth: `link: {bandwidth: R, latency: 10ms}`, default queue; a Python source writes as "
                   "fast as it can; goodput measured from 1 s to 11 s. 'payload ratio' = goodput / "
                   "(R x 1460/1500); the target ±3 % of the rate is applied to it. 'netcond stopped': SIGSTOP/SIGCONT "
                   "from the bench, as a loaded machine deschedules netcond (before the send buffer followed the "
                   "window, 60 ms stops gave 0.65).")


def hold_up(pid, hold, period, stop):
    """Stops process `pid` for `hold` seconds every `period` seconds until `stop` is set; always
    leaves it running."""
    while not stop.wait(period - hold):
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(hold)
        finally:
            os.kill(pid, signal.SIGCONT)
