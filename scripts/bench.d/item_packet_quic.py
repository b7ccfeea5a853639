"""Bench item 9g: QUIC (aioquic) against TCP+TLS 1.3 through the packet engine's edge profile."""
import os
import statistics
import subprocess
import sys

from benchlib import log, read_json_line, within
from packetlib import client_result, undisturbed_run


QUIC_SIZE = 200_000  # bytes: about 7 s of edge's 240 kbit/s down, plus the handshakes' round trips (0.84 s each)
QUIC_ROUNDS = 3
QUIC_TOLERANCE = 0.30


def quic_script():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "quic_load.py")


def packet_quic(h, t, srv):
    """A download of QUIC_SIZE bytes over QUIC (aioquic) and over TCP+TLS (Python's ssl), the client
    as the command of `netcond run --engine packet edge`, the server outside on 127.0.0.1;
    alternating, QUIC_ROUNDS of each; the medians compared."""
    name = "9g. packet engine QUIC"
    label = f"{name}: {QUIC_SIZE // 1000} KB over edge, QUIC (aioquic) vs TCP+TLS 1.3, median of {QUIC_ROUNDS} each"
    target = f"QUIC within ±{QUIC_TOLERANCE * 100:.0f} % of TCP+TLS"
    import importlib.util
    if importlib.util.find_spec("aioquic") is None:
        t.add(label, f"skipped: aioquic is not importable by {sys.executable} (`pip install aioquic`)", target, "SKIP")
        return
    cert, key = os.path.join(h.tmp, "quic-cert.pem"), os.path.join(h.tmp, "quic-key.pem")
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                           "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                           "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], capture_output=True, timeout=30)
    if made.returncode != 0:
        raise RuntimeError(f"openssl could not make a certificate: {made.stderr.decode(errors='replace')[-200:]}")
    server = h.spawn([sys.executable, quic_script(), "serve", "--cert", cert, "--key", key, "--size", str(QUIC_SIZE)],
                     "quic-server", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    results = {"quic": [], "tls": []}
    runs, disturbed = [], 0
    try:
        ports = read_json_line(server, 15)
        for rnd in range(QUIC_ROUNDS):
            for proto in ("quic", "tls"):
                if h.remaining() < 120:
                    raise RuntimeError("time budget")
                argv = [sys.executable, quic_script(), "get", proto, "--port", str(ports[proto]), "--cafile", cert,
                        "--size", str(QUIC_SIZE), "--timeout", "90"]
                run, d = undisturbed_run(h, "edge", argv, f"pkt-{proto}", timeout=120)
                disturbed += d
                data = client_result(run.json_out(), proto)
                results[proto].append((data["seconds"], data["handshake"], run))
                runs.append(run)
                log(f"    {proto} round {rnd + 1}: {data['seconds']:.2f} s (handshake {data['handshake']:.2f} s); "
                    f"{run.evidence()}")
    finally:
        try:
            server.stdin.close()
        except OSError:
            pass
        h.stop(server)
    q = statistics.median(x[0] for x in results["quic"])
    k = statistics.median(x[0] for x in results["tls"])
    hq = statistics.median(x[1] for x in results["quic"])
    hk = statistics.median(x[1] for x in results["tls"])
    flushed = sum(1 for r in runs if r.vanished)
    t.add(label, f"QUIC {q:.2f} s (runs {', '.join(f'{x[0]:.2f}' for x in results['quic'])}; handshake {hq:.2f} s) vs "
                 f"TCP+TLS {k:.2f} s (runs {', '.join(f'{x[0]:.2f}' for x in results['tls'])}; TCP and TLS handshakes "
                 f"{hk:.2f} s) = {q / k:.2f}x; netcond lost {sum(r.lost for r in runs)} packets (full queue)"
                 + (f"; {disturbed} attempt(s) disturbed by another program's firewall change"
                    + (f", {flushed} of the kept runs too" if flushed else ", run again") if disturbed else ""),
          target, "PASS" if within(q, k, QUIC_TOLERANCE) else "FAIL")
    t.notes.append(f"9g: scripts/bench.d/quic_load.py: a server outside netcond on 127.0.0.1 answers \"GET\" with "
                   f"{QUIC_SIZE:,} bytes over QUIC (aioquic, one stream, ALPN \"bench\", cubic, 1200-byte datagrams) "
                   f"and over TCP + TLS 1.3 (Python ssl, TCP_CONGESTION cubic), the same self-signed EC certificate "
                   f"(openssl, CN and SAN localhost); the client, as the command of `netcond run --engine packet "
                   f"edge` (240/200 kbit/s, 400/440 ms, 64KB queues), verifies it and times a new connection from "
                   f"before the handshake to the last byte. QUIC and TCP+TLS alternate, {QUIC_ROUNDS} runs each; "
                   f"medians compared. QUIC sends its request after one round trip, TCP+TLS after two, so QUIC is "
                   f"expected about one round trip (0.84 s) faster.")
