#!/usr/bin/env python3
"""Writes a classic pcap of made-up TCP downloads for `netcond trace record` (its memory and
time bench, and tests that compare recordings): headers only (snapped at 54 bytes of Ethernet or
40 of raw IP, the original length full), microsecond timestamps.

  capturegen.py OUT --packets 4000000                  one saturating download, 4M data segments
  capturegen.py OUT --packets 200000 --flows 3000      plus 3000 short connections interleaved

The download: a handshake (SYN, SYN-ACK 20 ms later, the client's ACK 0.1 ms after), then data
segments of 1448 bytes at a rate that changes every second (20..120 Mbit/s, seeded), an ACK from
the client every 8 segments, a hole (a segment left out, retransmitted 30 ms later) every
`--hole-every` segments, and an idle second every `--idle-every` segments. Deterministic for a seed.
"""
import argparse
import random
import struct
import sys

CLIENT = (bytes([10, 0, 0, 2]), 51234)
SERVER = (bytes([192, 0, 2, 1]), 443)
MSS = 1448


class Writer:
    def __init__(self, path, ethernet):
        self.f = open(path, "wb")
        self.ethernet = ethernet
        self.buf = bytearray()
        self.count = 0
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1 if ethernet else 101))

    def packet(self, t_us, src, dst, seq, ack, flags, payload):
        ip_len = 40 + payload
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 6, 0, src[0], dst[0])
        tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 0x50, flags, 65535, 0, 0)
        head = (b"\xaa" * 6 + b"\xbb" * 6 + b"\x08\x00" if self.ethernet else b"") + ip + tcp
        original = len(head) + payload
        self.buf += struct.pack("<IIII", t_us // 1_000_000, t_us % 1_000_000, len(head), original) + head
        self.count += 1
        if len(self.buf) > 1 << 20:
            self.f.write(self.buf)
            self.buf = bytearray()

    def close(self):
        self.f.write(self.buf)
        self.f.close()


def download(rng, client, server, segments, start_us, hole_every, idle_every, handshake=True):
    """(time µs, src, dst, seq, ack, flags, payload) of one download, as they are made."""
    c_isn, s_isn = rng.randrange(1 << 32), rng.randrange(1 << 32)
    t = start_us
    if handshake:
        yield (t, client, server, c_isn, 0, 0x02, 0)
        yield (t + 20_000, server, client, s_isn, c_isn + 1, 0x12, 0)
        yield (t + 20_100, client, server, c_isn + 1, s_isn + 1, 0x10, 0)
    t += 40_100
    seq = s_isn + 1
    rate = 0
    second = -1
    pending = []  # (due µs, seq) of holes to repair
    for i in range(segments):
        if (t - start_us) // 1_000_000 != second:
            second = (t - start_us) // 1_000_000
            rate = rng.uniform(20e6, 120e6)
        gap = 1500 * 8 / rate * 1e6
        t += max(1, int(gap * rng.uniform(0.5, 1.5)))
        if idle_every and i and i % idle_every == 0:
            t += 1_000_000
        while pending and pending[0][0] <= t:
            _, hole = pending.pop(0)
            yield (t, server, client, hole, c_isn + 1, 0x10, MSS)
        if hole_every and i % hole_every == hole_every - 1:
            pending.append((t + 30_000, seq))
        else:
            yield (t, server, client, seq, c_isn + 1, 0x10, MSS)
        seq += MSS
        if i % 8 == 7:
            yield (t + 50, client, server, c_isn + 1, seq, 0x10, 0)
    for _, hole in pending:
        t += 100
        yield (t, server, client, hole, c_isn + 1, 0x10, MSS)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--packets", type=int, default=4_000_000, help="data segments of the main download")
    p.add_argument("--flows", type=int, default=0, help="short connections interleaved with it")
    p.add_argument("--raw", action="store_true", help="raw IP (link type 101) instead of Ethernet")
    p.add_argument("--hole-every", type=int, default=50_000)
    p.add_argument("--idle-every", type=int, default=1_500_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-handshake", action="store_true", help="leave the main download's handshake out")
    a = p.parse_args()
    rng = random.Random(a.seed)
    w = Writer(a.out, not a.raw)
    base = 1_700_000_000 * 1_000_000
    if a.flows == 0:
        # One download, written as it is made (4M segments would make a large list).
        for row in download(rng, CLIENT, SERVER, a.packets, base, a.hole_every, a.idle_every, not a.no_handshake):
            w.packet(*row)
    else:
        rows = list(download(rng, CLIENT, SERVER, a.packets, base, a.hole_every, a.idle_every, not a.no_handshake))
        span = max(1, rows[-1][0] - base)
        for n in range(a.flows):
            client = (bytes([10, 1 + n // 60000 % 200, (n // 250) % 240, 1 + n % 250]), 40000 + n % 20000)
            server = (bytes([198, 51, 100, 1 + n % 200]), 443 if n % 3 else 80)
            start = base + rng.randrange(span)
            rows += download(rng, client, server, rng.randrange(1, 60), start, 0, 0)
        rows.sort(key=lambda r: r[0])
        for row in rows:
            w.packet(*row)
    w.close()
    print(f"{a.out}: {w.count} packets", file=sys.stderr)


if __name__ == "__main__":
    main()
