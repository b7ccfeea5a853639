"""Bench item 12's client: reads one HTTP download for SECONDS, stamping every read (monotonic ns,
bytes) into OUT. Standalone (the standard library only), so it runs as any user, inside netcond's
run or inside mahimahi's shell.

Usage: python3 trace_client.py URL SECONDS OUT"""
import os
import socket
import sys
import time
import urllib.parse


def receive(url, seconds, out):
    """Reads the download for `seconds`, stamping each read. The receive buffer is set before the
    connection (so the window scale fits it) to 8 MB: the sender may keep the link busy at
    250 Mbit/s and 60 ms, and never has more in flight than the bench's queue holds, so nothing
    is dropped and no read waits for TCP's repair (what would be measured then is TCP, not the link)."""
    proxy = os.environ.get("http_proxy") or os.environ.get("HTTP_PROXY")
    target = urllib.parse.urlsplit(proxy or url)
    path = url if proxy else (urllib.parse.urlsplit(url).path or "/")
    sock = socket.socket(socket.AF_INET6 if ":" in (target.hostname or "") else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root), past rmem_max
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.settimeout(30)
    sock.connect((target.hostname, target.port or 80))
    host = urllib.parse.urlsplit(url).netloc
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    stamps, head = [], b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        if head is not None:
            head += chunk
            if b"\r\n\r\n" not in head:
                continue
            chunk = head.split(b"\r\n\r\n", 1)[1]
            head = None
        stamps.append((time.monotonic_ns(), len(chunk)))
    sock.close()
    with open(out, "w") as f:
        f.write("".join(f"{t} {n}\n" for t, n in stamps))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: trace_client.py URL SECONDS OUT")
    receive(sys.argv[1], float(sys.argv[2]), sys.argv[3])
