#!/usr/bin/env python3
"""netcond benchmark: the measuring half of scripts/bench (which installs tools and builds first).

Usage (normally called by scripts/bench):
  bench.py run --binary PATH --tmp DIR --pidfile FILE --out bench-results.md --command "..."
  bench.py serve [--bind ADDR]         test servers (echo + bulk source) in their own process
  bench.py client pingpong|download|udp  item 9's clients (run as the command of `netcond run --engine
                                       packet`, or directly): --port P ...; print one JSON object
  bench.py udpecho --n N               9e's UDP echo server: prints {"port": P}, its counts when stdin closes

Every process this starts is put in its own process group, recorded in --pidfile (so the bash
trap can kill it even if this process is killed), and stopped in a finally block. Every socket has
a timeout and every loop a deadline. A failing item becomes ERROR/FAIL rows; the others still run.

This file is the entry point (options, the items' loop, the subcommands); the rest, all in this
folder: benchlib.py (what the items share), packetlib.py (what item 9's sub-items share),
mahimahilib.py (9b's and 12's mahimahi columns: its tools, a network namespace of the bench's own),
references.py (the issue's figures, tcp_reference.py's runs), workloads.py (the child processes:
serve, timers, tcpserve, client), one module per item: item_throughput.py (1), item_latency.py (2),
item_bandwidth.py (3), item_overhead.py (4), item_loss.py (5a, 5b, 5d), item_bufferbloat.py (5c),
item_memory.py (6), item_startup.py (7), item_control.py (8), item_packet.py (9, 9a-9d),
item_packet_udp.py (9e), item_packet_fidelity.py (9f), item_packet_quic.py (9g), html_report.py (10),
item_engines.py (11), item_traces.py (12; its client trace_client.py), item_toxiproxy.py (13),
item_cold_build.py (14, only when asked: --only 14), item_fuzz.py (15, only when asked: --only 15),
item_routes.py (16, 16b), item_accept_storm.py (17; its client and upstream: the same file run as a script).
"""
import argparse
import os
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The sibling modules, importable whatever the working directory.
import html_report  # noqa: E402  (item 10, a module of its own)
from benchlib import Harness, Servers, Table, cpuidle_driver, log  # noqa: E402
from item_accept_storm import item_accept_storm  # noqa: E402
from item_bandwidth import item_bandwidth  # noqa: E402
from item_bufferbloat import item_bufferbloat  # noqa: E402
from item_cold_build import item_cold_build  # noqa: E402
from item_fuzz import item_fuzz  # noqa: E402
from item_control import item_control_stall  # noqa: E402
from item_engines import item_engines  # noqa: E402
from item_latency import item_latency  # noqa: E402
from item_loss import item_kernel_reference, item_loss_curl, item_loss_steady  # noqa: E402
from item_memory import item_memory  # noqa: E402
from item_overhead import item_overhead  # noqa: E402
from item_routes import item_routes, item_routes_packet  # noqa: E402
from item_packet import item_packet  # noqa: E402
from item_packet_udp import udp_echo  # noqa: E402
from item_startup import item_scenario_startup  # noqa: E402
from item_throughput import item_throughput  # noqa: E402
from item_toxiproxy import item_toxiproxy  # noqa: E402
from item_traces import item_traces  # noqa: E402
from workloads import client, serve, tcp_serve, timers  # noqa: E402


def run(args):
    h = Harness(args)
    header = [
        "# netcond benchmark results",
        "",
        f"Command: `{args.command}`",
        "",
        f"Date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; host: {os.cpu_count()} CPUs, {os.uname().release}, "
        f"cpuidle driver {cpuidle_driver()} (`--low-latency` changes nothing without one); "
        f"{args.describe}; load average at start {os.getloadavg()[0]:.2f}",
    ]
    t = Table(args.out, header)

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    srv = None
    try:
        try:
            srv = Servers(h)
        except Exception as e:
            t.error("test servers", e)
        items = [
            ("1. pass-through throughput", lambda: item_throughput(h, t)),
            ("2. latency accuracy", lambda: item_latency(h, t, srv)),
            ("3. bandwidth accuracy", lambda: item_bandwidth(h, t, srv)),
            ("4. proxy overhead", lambda: item_overhead(h, t, srv)),
            ("6. memory", lambda: item_memory(h, t, srv)),
            ("5c. bufferbloat", lambda: item_bufferbloat(h, t, srv)),
            ("5a. steady goodput", lambda: item_loss_steady(h, t, srv)),
            ("5b. 1 MB via HTTP proxy", lambda: item_loss_curl(h, t)),
            ("7. scenario start-up", lambda: item_scenario_startup(h, t)),
            ("8. control API work", lambda: item_control_stall(h, t, srv)),
            ("5d. 1 MB vs real Linux TCP", lambda: item_kernel_reference(h, t)),
            ("9. packet engine", lambda: item_packet(h, t, srv)),
            ("10. HTML report", lambda: html_report.item_html_report(h, t)),
            ("11. same profile, both engines", lambda: item_engines(h, t, log)),
            ("12. trace replay", lambda: item_traces(h, t, log)),
            ("13. Toxiproxy side by side", lambda: item_toxiproxy(h, t, log)),
            ("14. cold build", lambda: item_cold_build(h, t)),
            ("15. fuzzing", lambda: item_fuzz(h, t)),
            ("16. routes", lambda: item_routes(h, t, srv)),
            ("16b. routes, packet engine", lambda: item_routes_packet(h, t)),
            ("17. 5,000 connections at once", lambda: item_accept_storm(h, t)),
        ]
        only = set(args.only.split(",")) if args.only else None
        h.only = only
        for label, fn in items:
            # An item runs when its number is listed, or one of its sub-items (9e for 9).
            key = label.split(".")[0]
            if only and key not in only and not any(o[:-1] == key and o[-1:].isalpha() for o in only):
                continue
            if h.remaining() < 20:
                t.add(label, "skipped: time budget", "-", "SKIP")
                continue
            log(f"== {label} ({h.remaining():.0f} s of budget left, load average {os.getloadavg()[0]:.2f})")
            try:
                if srv is None and "throughput" not in label and "HTTP" not in label and "scenario" not in label \
                        and "Linux" not in label and "HTML" not in label and "engines" not in label \
                        and "trace" not in label and "cold" not in label and "fuzz" not in label \
                        and "at once" not in label:
                    raise RuntimeError("test servers did not start")
                fn()
            except KeyboardInterrupt:
                raise
            except Exception as e:
                traceback.print_exc(file=sys.stderr)
                t.error(label, e)
            t.save(h)
    except KeyboardInterrupt as e:
        t.add("run", f"interrupted ({e})", "-", "ERROR")
    finally:
        if srv:
            srv.close()
        h.stop_all()
        t.save(h)
    sys.stdout.write(t.render(h))
    sys.stdout.flush()


def main():
    if sys.argv[1:2] == ["client"]:  # item 9's clients, run as netcond's command: their own options
        client(sys.argv[2:])
        return
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("--bind", default="127.0.0.1")
    ts = sub.add_parser("tcpserve")
    ts.add_argument("--bind", default="127.0.0.1")
    ts.add_argument("--port", type=int, default=0, help="the fresh port; source +1, echo +2 (0: free ports)")
    ts.add_argument("--cc", default="cubic")
    ts.add_argument("--size", type=int, default=1 << 20, help="bytes per fresh connection")
    up = sub.add_parser("udpecho")
    up.add_argument("--n", type=int, required=True, help="datagrams expected (sequence numbers 0..n-1)")
    up.add_argument("--deadline", type=float, default=120.0, help="seconds before it reports and exits anyway")
    tp = sub.add_parser("timers")
    tp.add_argument("--hop", type=float, default=0.1)
    r = sub.add_parser("run")
    r.add_argument("--binary", required=True)
    r.add_argument("--tmp", required=True)
    r.add_argument("--pidfile", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--command", default="scripts/bench")
    r.add_argument("--describe", default="")
    r.add_argument("--budget", type=float, default=780.0, help="seconds for all measurements")
    r.add_argument("--only", default="", help="comma-separated item numbers, e.g. 1,2,5c,9 (9a..9g: sub-items of 9)")
    args = ap.parse_args()
    if args.cmd == "timers":
        timers(args.hop)
    elif args.cmd == "udpecho":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            udp_echo(args.n, args.deadline)
        except KeyboardInterrupt:
            pass
    elif args.cmd == "tcpserve":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            tcp_serve(args.bind, args.port, args.cc, args.size)
        except KeyboardInterrupt:
            pass
    elif args.cmd == "serve":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            serve(args.bind)
        except KeyboardInterrupt:
            pass
    else:
        run(args)


if __name__ == "__main__":
    main()
