"""Bench item 9e: UDP through the packet engine, with its echo server (`bench.py udpecho`) and its
client (`bench.py client udp`)."""
import json
import os
import selectors
import socket
import struct
import subprocess
import sys
import time

from benchlib import BENCH, pct, read_json_line
from packetlib import PacketRun, client_argv, client_result, packet_profile


# 9e: UDP at 1,000 datagrams/s. Each datagram (UDP_SIZE bytes) starts with UDP_HEAD: sequence number,
# the client's send time, the echo server's receive and send times (CLOCK_MONOTONIC, ns, the same
# clock in every process of this host). Stamps are taken in user space, just before sendto and just
# after recvfrom: on loopback netcond holds both directions on input, after the kernel's receive
# stamp (SO_TIMESTAMPNS) is taken, so a kernel stamp would predate the emulated delay.
UDP_HEAD = struct.Struct("!Iqqq")
UDP_SIZE = 100
UDP_LATENCY_MS = 50.0  # each way
UDP_LOSS_UP, UDP_LOSS_DOWN = 1.0, 2.0  # percent; different so that a swapped direction shows


def delay_stats(ns_values, base_ms):
    """{min, p50, p99, max} of `ns_values` in ms, minus `base_ms`; None when empty."""
    if not ns_values:
        return None
    ms = sorted(v / 1e6 - base_ms for v in ns_values)
    return {"n": len(ms), "min": ms[0], "p50": pct(ms, 50), "p99": pct(ms, 99), "max": ms[-1]}


def udp_echo(n, deadline):
    """`bench.py udpecho`: the 9e server, outside netcond. Echoes each datagram with its receive and
    send times written in; counts what arrived (sequence numbers < n). Prints {"port": P}, then, when
    stdin closes (or after `deadline` seconds), one JSON object with the counts and the one-way up
    delays (its receive time - the client's send time)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    seen = bytearray(n)
    up_ns = []
    counts = {"received": 0, "duplicates": 0, "foreign": 0, "echoed": 0, "echo_errors": 0}
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, "udp")
    sel.register(sys.stdin, selectors.EVENT_READ, "stdin")
    end = time.monotonic() + deadline
    done = False
    while not done and time.monotonic() < end:
        for key, _ in sel.select(timeout=0.5):
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    done = True
                continue
            for _ in range(256):
                try:
                    data, addr = sock.recvfrom(2048)
                except (BlockingIOError, InterruptedError):
                    break
                now = time.monotonic_ns()
                if len(data) < UDP_HEAD.size:
                    counts["foreign"] += 1
                    continue
                seq, sent, _, _ = UDP_HEAD.unpack_from(data)
                if seq >= n:
                    counts["foreign"] += 1
                    continue
                if seen[seq]:
                    counts["duplicates"] += 1
                else:
                    seen[seq] = 1
                    counts["received"] += 1
                    up_ns.append(now - sent)
                reply = bytearray(data)
                UDP_HEAD.pack_into(reply, 0, seq, sent, now, time.monotonic_ns())
                try:
                    sock.sendto(reply, addr)
                    counts["echoed"] += 1
                except OSError:
                    counts["echo_errors"] += 1
    counts["up_ms"] = delay_stats(up_ns, 0.0)
    counts["closed_by_stdin"] = done
    print(json.dumps(counts), flush=True)


def udp_client(port, rate, seconds, drain, size=UDP_SIZE):
    """`bench.py client udp`: sends rate x seconds datagrams to 127.0.0.1:port at fixed times
    (start + i / rate; a late send is not made up by a burst beyond what the schedule owes), reads the
    echoes meanwhile and for `drain` seconds after the last send. Returns the counts, the round-trip
    times and the one-way down delays (receive time - the server's send time), in ms."""
    n = int(rate * seconds)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    payload = bytearray(max(size, UDP_HEAD.size))
    seen = bytearray(n)
    rtt_ns, down_ns = [], []
    counts = {"sent": 0, "send_errors": 0, "received": 0, "duplicates": 0, "foreign": 0}
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    start = time.monotonic()
    first_send = last_send = None
    behind_max = 0.0
    i = 0
    stop_at = start + seconds + drain + 5  # the hard end, even if sends fall behind
    while True:
        now = time.monotonic()
        if now > stop_at or (i >= n and last_send is not None and now > last_send + drain):
            break
        while i < n and start + i / rate <= now:
            behind_max = max(behind_max, now - (start + i / rate))
            UDP_HEAD.pack_into(payload, 0, i, time.monotonic_ns(), 0, 0)
            try:
                sock.send(payload)
                counts["sent"] += 1
            except OSError:
                counts["send_errors"] += 1
            last_send = time.monotonic()
            if first_send is None:
                first_send = last_send
            i += 1
            now = time.monotonic()
        wait = (start + i / rate - now) if i < n else (last_send + drain - now)
        if sel.select(timeout=max(0.0, min(wait, 0.1))):
            for _ in range(256):
                try:
                    data = sock.recv(2048)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:  # e.g. ECONNREFUSED from an ICMP port unreachable
                    counts["foreign"] += 1
                    break
                got = time.monotonic_ns()
                if len(data) < UDP_HEAD.size:
                    counts["foreign"] += 1
                    continue
                seq, sent, _, echoed = UDP_HEAD.unpack_from(data)
                if seq >= n or not sent or not echoed:
                    counts["foreign"] += 1
                    continue
                if seen[seq]:
                    counts["duplicates"] += 1
                    continue
                seen[seq] = 1
                counts["received"] += 1
                rtt_ns.append(got - sent)
                down_ns.append(got - echoed)
    sock.close()
    span = (last_send - first_send) if counts["sent"] > 1 else 0.0
    counts.update({
        "planned": n, "send_span_s": span, "send_rate": (counts["sent"] - 1) / span if span else 0.0,
        "send_behind_max_ms": behind_max * 1e3,
        "rtt_ms": delay_stats(rtt_ns, 0.0), "down_ms": delay_stats(down_ns, 0.0),
    })
    return counts


def packet_udp(h, t, srv):
    """UDP through the packet engine: `bench.py client udp` (1,000 datagrams/s for 30 s) as netcond's
    command, the bench's UDP echo server outside it. Loss up (what the server got), loss down (what
    came back of what the server echoed), one-way delays both ways and the round trip."""
    name = "9e. packet engine UDP"
    rate, seconds, drain = 1000, 30, 1.5
    n = rate * seconds
    lat = UDP_LATENCY_MS
    prof = packet_profile(h, "pkt-udp", {"latency": f"{lat:.0f}ms", "loss": f"{UDP_LOSS_DOWN:g}%"},
                          {"latency": f"{lat:.0f}ms", "loss": f"{UDP_LOSS_UP:g}%"})
    server = h.spawn([sys.executable, BENCH, "udpecho", "--n", str(n),
                      "--deadline", str(seconds + 60)], "udp-echo-9e", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    run = None
    try:
        port = read_json_line(server, 10)["port"]
        argv = client_argv("udp", "--port", port, "--rate", rate, "--seconds", seconds, "--drain", drain)
        run = PacketRun(h, prof, argv, "pkt-udp", timeout=seconds + drain + 25)
        data = client_result(run.json_out(), "udp client")
        try:
            out, _ = server.communicate(timeout=10)  # closes its stdin: it prints its counts and exits
        except subprocess.TimeoutExpired:
            raise TimeoutError("the UDP echo server did not report in 10 s")
        lines = [l for l in out.decode(errors="replace").splitlines() if l.startswith("{\"received\"")]
        if not lines:
            raise RuntimeError(f"the UDP echo server printed no counts (exit {server.returncode})")
        sd = json.loads(lines[-1])
    finally:
        h.stop(server)
    sent, got_up, echoed, got_down = data["sent"], sd["received"], sd["echoed"], data["received"]
    if not sent or not echoed:
        raise RuntimeError(f"nothing crossed: sent {sent}, server received {got_up}, echoed {echoed}; "
                           f"{run.summary}")
    miss_up, miss_down = sent - got_up, echoed - got_down
    loss_up, loss_down = miss_up / sent * 100, miss_down / echoed * 100
    pace = (f"{sent} sent in {data['send_span_s']:.2f} s = {data['send_rate']:.0f}/s"
            + (f", {data['send_errors']} send errors" if data["send_errors"] else ""))
    for label, loss, ref, missed, of in (("up (client -> server)", loss_up, UDP_LOSS_UP, miss_up, "sent"),
                                         ("down (server echo -> client)", loss_down, UDP_LOSS_DOWN, miss_down,
                                          "echoed")):
        t.add(f"{name}: loss {label}, profile {ref:g} %",
              f"{loss:.2f} % ({missed} of {sent if of == 'sent' else echoed} {of}; {pace})",
              f"{ref:g} % +/- 0.5 pt", "PASS" if abs(loss - ref) <= 0.5 else "FAIL")
    rt_expected = (1 - (1 - UDP_LOSS_UP / 100) * (1 - UDP_LOSS_DOWN / 100)) * 100
    t.add(f"{name}: round-trip loss (echoes missing of sent)", f"{(sent - got_down) / sent * 100:.2f} % "
          f"(expected 1 - 0.99 x 0.98 = {rt_expected:.2f} %)", "(report)", "INFO")
    for label, st, base in ((f"one-way up - {lat:.0f}ms", sd.get("up_ms"), lat),
                            (f"one-way down - {lat:.0f}ms", data.get("down_ms"), lat),
                            (f"RTT - {2 * lat:.0f}ms", data.get("rtt_ms"), 2 * lat)):
        if not st:
            t.add(f"{name}: {label}", "no samples", "min >= 0 ms", "FAIL")
            continue
        t.add(f"{name}: {label} min (never early)", f"{st['min'] - base:.3f} ms ({st['n']} samples)",
              "min >= 0 ms", "PASS" if st["min"] - base >= 0 else "FAIL")
        t.add(f"{name}: {label} p50 / p99 / max",
              f"{st['p50'] - base:.3f} / {st['p99'] - base:.3f} / {st['max'] - base:.3f} ms", "(report)", "INFO")
    # netcond's own counts: every datagram offered up, every echo offered down, and its losses are
    # exactly what the two receivers missed (anything else vanished outside the emulated link).
    match = (run.up_packets == sent and run.down_packets == echoed and run.lost == miss_up + miss_down
             and not run.kernel_drops)
    t.add(f"{name}: netcond's summary vs the receivers",
          f"{run.evidence()}; receivers missed {miss_up} up + {miss_down} down = {miss_up + miss_down}; "
          f"{sent} sent, {echoed} echoed"
          + (f"; duplicates {sd['duplicates']} up / {data['duplicates']} down" if sd["duplicates"] or data["duplicates"]
             else "") + f"; sends up to {data['send_behind_max_ms']:.1f} ms behind schedule",
          "up = sent, down = echoed, lost = missed", "PASS" if match else "FAIL")
    t.notes.append(f"9e: `bench.py client udp` as the command of `netcond run --engine packet` with "
                   f"`down: {{latency: {lat:.0f}ms, loss: {UDP_LOSS_DOWN:g}%}}, up: {{latency: {lat:.0f}ms, loss: "
                   f"{UDP_LOSS_UP:g}%}}` (Bernoulli loss, no rate; the two losses differ so that a swapped direction "
                   f"shows): {n} datagrams of {UDP_SIZE} bytes at {rate}/s for {seconds} s (fixed send times) to the "
                   f"bench's UDP echo server (`bench.py udpecho`, outside netcond, 127.0.0.1), then {drain} s for the "
                   f"last echoes. Loss up = 1 - server received / client sent, against up's {UDP_LOSS_UP:g} %; loss "
                   f"down = 1 - client received / server echoed, against down's {UDP_LOSS_DOWN:g} % (the round trip "
                   f"compounds both, reported only). Delays from CLOCK_MONOTONIC stamps in the datagram, taken in user "
                   f"space just before send and just after receive (so they can only add time): one-way up = server "
                   f"receive - client send, one-way down = client receive - server send, RTT = client receive - "
                   f"client send; 'never early' = min >= the emulated delay. The last row checks netcond's summary "
                   f"line: up packets = datagrams sent, down packets = echoes sent, packets lost = what the two "
                   f"receivers missed.")
