"""What a program sees of an IPv6-only network with NAT64 and DNS64, as a JSON line: IPv4 sockets
refused, names only as IPv6 in the prefix, the prefix found by RFC 7050, a download through the
translation (its bytes and time), and the connect time of a handshake across the link."""
import hashlib
import ipaddress
import json
import os
import socket
import struct
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
# A name that is not the run's, asked of the DNS64 itself (the hosts file would answer first).
server = next(line.split()[1] for line in open("/etc/resolv.conf") if line.startswith("nameserver"))
query = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x09localhost\x00" + struct.pack("!HH", 28, 1)
with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as dns:
    dns.settimeout(5)
    dns.sendto(query, (server, 53))
    reply = dns.recv(2048)
answers, at = [], len(query)
for _ in range(struct.unpack("!H", reply[6:8])[0]):
    kind, length = struct.unpack("!H", reply[at + 2:at + 4])[0], struct.unpack("!H", reply[at + 10:at + 12])[0]
    if kind == 28:
        answers.append(str(ipaddress.IPv6Address(reply[at + 12:at + 12 + length])))
    at += 12 + length
out["dns64_localhost"] = answers
started = time.monotonic()
sock = socket.create_connection(("origin.netcond.test", 80), timeout=10)
out["connect_seconds"] = time.monotonic() - started
out["peer"] = sock.getpeername()[0]
sock.close()
body = urllib.request.urlopen("http://api.netcond.test/bytes/300KB", timeout=30).read()
out["download"] = [len(body), hashlib.sha256(body).hexdigest()]
print(json.dumps(out))
