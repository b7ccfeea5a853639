"""Bench item 1: pass-through throughput (iperf3 direct, through socat, through netcond: its forward
relayed in the kernel, splice(2), as it is by default while nothing shapes it, and with --no-splice,
through netcond's own loop, the path before issue 43, in the same run). Two references bound what a
forward can reach on the machine: the least a relay in user space does (`relays/splice_relay.c`:
two threads splicing, nothing counted) and a forward the kernel does itself (`relays/sockmap_relay.c`,
an sk_skb verdict program redirecting between the two sockets; root)."""
import json
import os
import shutil
import subprocess
import time

from benchlib import Netcond, free_port, log, wait_listening

RELAYS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relays")


def start_relay(h, name, target_port):
    """A reference relay from `relays/NAME.c`, built with the host's C compiler and listening on a
    free port towards `target_port`: (process, port), or (None, why not)."""
    compiler = shutil.which("cc") or shutil.which("clang")
    if compiler is None:
        return None, "no C compiler (cc, clang)"
    if name == "sockmap_relay" and os.geteuid() != 0:
        return None, "needs root (BPF)"
    binary = os.path.join(h.tmp, name)
    built = subprocess.run([compiler, "-O2", "-pthread", "-o", binary, os.path.join(RELAYS, f"{name}.c")],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return None, f"did not build: {built.stderr.strip()[-200:]}"
    port = free_port()
    process = h.spawn([binary, str(port), str(target_port)], name)
    if not wait_listening(port):
        h.stop(process)
        return None, "did not start (see its log)"
    return process, port

# The references' rows: the relay, the row's name, what it is.
REFERENCES = (("splice_relay", "1. pass-through ceiling", "the least relay in user space (relays/splice_relay.c)"),
              ("sockmap_relay", "1. pass-through, kernel forward",
               "a forward in the kernel (relays/sockmap_relay.c, sockmap)"))


def item_throughput(h, t):
    name = "1. pass-through throughput"
    iperf_port = free_port()
    server = h.spawn(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(iperf_port)], "iperf3-server")
    socat = nc = nio = None
    relays = {}
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
        missing = {}
        for relay, _, _ in REFERENCES:  # not `name`: the item's rows are named by it
            process, port = start_relay(h, relay, iperf_port)
            if process is None:
                missing[relay] = port
            else:
                relays[relay] = process
                ports[relay] = port
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
        for relay, row, label in REFERENCES:
            if best.get(relay):
                t.add(f"{row}: {label} / direct",
                      f"{g(best[relay])} = {best[relay] / best['direct']:.2f}x direct; netcond "
                      f"{best['netcond'] / best[relay]:.2f}x it", "reference", "INFO")
            else:
                t.add(f"{row}: {label}", f"not measured: {missing.get(relay) or errors.get(relay)}", "reference",
                      "INFO")
        if best["socat"]:
            t.add(f"{name}: netcond vs socat", f"{g(best['netcond'])} vs {g(best['socat'])} "
                  f"({best['netcond'] / best['socat']:.2f}x)", ">= socat",
                  "PASS" if best["netcond"] >= best["socat"] else "FAIL")
        else:
            t.add(f"{name}: netcond vs socat", f"socat failed: {errors.get('socat')}", ">= socat", "ERROR")
        t.notes.append("Throughput: iperf3 one stream, 5 s, two alternating rounds (direct, socat, netcond, "
                       "netcond --no-splice), "
                       "best of two per path; the references (relays/*.c) in the same rounds; socat run as `socat TCP-LISTEN:P,reuseaddr,fork,bind=127.0.0.1 "
                       "TCP:127.0.0.1:S` (bind added to stay on loopback).")
    finally:
        for n in (nc, nio):
            if n:
                n.stop()
        for p in (socat, *relays.values(), server):
            if p:
                h.stop(p)
