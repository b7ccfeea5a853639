"""Bench item 1: pass-through throughput (iperf3 direct, through socat, through netcond: its forward
relayed in the kernel, splice(2), as it is by default while nothing shapes it, and with --no-splice,
through netcond's own loop, the path before issue 43, in the same run)."""
import json
import subprocess
import time

from benchlib import Netcond, free_port, log, wait_listening


def item_throughput(h, t):
    name = "1. pass-through throughput"
    iperf_port = free_port()
    server = h.spawn(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(iperf_port)], "iperf3-server")
    socat = nc = nio = None
    try:
        if not wait_listening(iperf_port):
            raise RuntimeError("iperf3 server did not start")
        socat_port = free_port()
        socat = h.spawn(["socat", f"TCP-LISTEN:{socat_port},reuseaddr,fork,bind=127.0.0.1",
                         f"TCP:127.0.0.1:{iperf_port}"], "socat")
        if not wait_listening(socat_port):
            raise RuntimeError("socat did not start")
        nc = Netcond(h, "none", [iperf_port], seed=1, name="none-iperf")
        nio = Netcond(h, "none", [iperf_port], seed=1, name="none-iperf-no-splice", extra=["--no-splice"])
        ports = {"direct": iperf_port, "socat": socat_port, "netcond": nc.forwards[0],
                 "no-splice": nio.forwards[0]}
        best = {k: None for k in ports}
        errors = {}
        for rnd in range(2):  # two alternating rounds, best of two per path
            for key, port in ports.items():
                try:
                    r = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "5", "-J",
                                        "--connect-timeout", "3000"], capture_output=True, timeout=25)
                    data = json.loads(r.stdout.decode() or "{}")
                    if "error" in data:
                        raise RuntimeError(data["error"])
                    bps = data["end"]["sum_received"]["bits_per_second"]
                    log(f"    iperf3 {key} round {rnd + 1}: {bps / 1e9:.2f} Gbit/s")
                    best[key] = max(best[key] or 0, bps)
                except Exception as e:
                    errors[key] = e
                    log(f"    iperf3 {key} round {rnd + 1}: error {e}")
                time.sleep(0.5)
        if not nc.alive() or not nio.alive():
            h.note("netcond died during the iperf3 pass-through test")
        if best["direct"] is None or best["netcond"] is None:
            raise RuntimeError(f"iperf3 failed: {errors}")
        g = lambda v: f"{v / 1e9:.2f} Gbit/s" if v else "n/a"
        ratio = best["netcond"] / best["direct"]
        t.add(f"{name}: netcond / direct (direct {g(best['direct'])})",
              f"{g(best['netcond'])} = {ratio:.2f}x direct", ">= 0.60x", "PASS" if ratio >= 0.6 else "FAIL")
        if best["no-splice"]:
            t.add(f"{name}: netcond --no-splice / direct (NIO relay, before issue 43)",
                  f"{g(best['no-splice'])} = {best['no-splice'] / best['direct']:.2f}x direct "
                  f"(splice: {best['netcond'] / best['no-splice']:.2f}x it)", "info", "INFO")
        if best["socat"]:
            t.add(f"{name}: netcond vs socat", f"{g(best['netcond'])} vs {g(best['socat'])} "
                  f"({best['netcond'] / best['socat']:.2f}x)", ">= socat",
                  "PASS" if best["netcond"] >= best["socat"] else "FAIL")
        else:
            t.add(f"{name}: netcond vs socat", f"socat failed: {errors.get('socat')}", ">= socat", "ERROR")
        t.notes.append("Throughput: iperf3 one stream, 5 s, two alternating rounds (direct, socat, netcond, "
                       "netcond --no-splice), "
                       "best of two per path; socat run as `socat TCP-LISTEN:P,reuseaddr,fork,bind=127.0.0.1 "
                       "TCP:127.0.0.1:S` (bind added to stay on loopback).")
    finally:
        for n in (nc, nio):
            if n:
                n.stop()
        for p in (socat, server):
            if p:
                h.stop(p)
