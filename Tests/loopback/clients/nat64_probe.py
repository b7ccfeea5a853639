"""What a program sees of an IPv6-only network with NAT64 and DNS64, as a JSON line: IPv4 sockets
refused, names only as IPv6 in the prefix, the prefix found by RFC 7050, a download through the
translation (its bytes and time), and the connect time of a handshake across the link."""
import hashlib
import json
import os
import socket
import time
import urllib.request

out = {}
for label, address in (("ipv4_loopback", ("127.0.0.1", 9)), ("ipv4_mapped", ("::ffff:127.0.0.1", 9))):
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(5)
        sock.connect(address)
        out[label] = "connected"
    except OSError as error:
        out[label] = error.errno
    finally:
        sock.close()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    udp.sendto(b"x", ("127.0.0.1", 9))
    out["ipv4_udp"] = "sent"
except OSError as error:
    out["ipv4_udp"] = error.errno
udp.close()
try:
    out["a_only"] = socket.getaddrinfo("api.netcond.test", 80, socket.AF_INET)[0][4][0]
except socket.gaierror as error:
    out["a_only"] = error.errno
out["aaaa"] = socket.getaddrinfo("api.netcond.test", 80, socket.AF_INET6)[0][4][0]
out["origin"] = [info[4][0] for info in socket.getaddrinfo("origin.netcond.test", 80)]
out["prefix"] = sorted({info[4][0] for info in socket.getaddrinfo("ipv4only.arpa", 80, socket.AF_INET6)})
started = time.monotonic()
sock = socket.create_connection(("origin.netcond.test", 80), timeout=10)
out["connect_seconds"] = time.monotonic() - started
out["peer"] = sock.getpeername()[0]
sock.close()
body = urllib.request.urlopen("http://api.netcond.test/bytes/300KB", timeout=30).read()
out["download"] = [len(body), hashlib.sha256(body).hexdigest()]
print(json.dumps(out))
