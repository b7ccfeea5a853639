#!/usr/bin/env python3
"""9g's download over QUIC (aioquic) and over TCP+TLS (Python's ssl), server and client.

  quic_load.py serve --cert CERT --key KEY --size N
      a QUIC server (UDP) and a TLS server (TCP) on 127.0.0.1, free ports, the same certificate; each
      answers a request (one stream, or one TLS connection: "GET\\n") with N bytes and ends it (FIN).
      Both send with cubic (aioquic's `congestion_control_algorithm`, TCP_CONGESTION on the TCP
      socket). Prints {"quic": P, "tls": P}; exits when stdin closes (or on SIGTERM).
  quic_load.py get quic|tls --port P --cafile CERT --size N [--timeout S]
      one download on a new connection, timed from before the handshake to the last byte (QUIC:
      1 round trip of handshake before the request; TCP+TLS 1.3: 2); verifies the server as
      `localhost` against CERT. Prints {"seconds": t, "handshake": t, "bytes": n} (or {"error": ...}).

aioquic is needed for QUIC (`pip install aioquic`); the bench skips 9g without it.
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import ssl
import sys
import time

ALPN = "bench"
SERVER_NAME = "localhost"


def quic_configuration(is_client):
    from aioquic.quic.configuration import QuicConfiguration
    return QuicConfiguration(is_client=is_client, alpn_protocols=[ALPN], congestion_control_algorithm="cubic",
                             server_name=SERVER_NAME if is_client else None, idle_timeout=60.0)


async def serve(cert, key, size):
    from aioquic.asyncio import serve as quic_serve
    payload = bytes(range(256)) * (size // 256 + 1)
    payload = payload[:size]
    loop = asyncio.get_running_loop()

    def on_stream(reader, writer):
        async def answer():
            try:
                await asyncio.wait_for(reader.readline(), 120)
                writer.write(payload)
                writer.write_eof()
            except Exception:
                pass
        loop.create_task(answer())

    config = quic_configuration(False)
    config.load_cert_chain(cert, key)
    quic = await quic_serve("127.0.0.1", 0, configuration=config, stream_handler=on_stream)

    tls_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls_ctx.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
    listener.bind(("127.0.0.1", 0))

    async def on_tls(reader, writer):
        try:
            await asyncio.wait_for(reader.readline(), 120)
            writer.write(payload)
            await asyncio.wait_for(writer.drain(), 300)
        except Exception:
            pass
        finally:
            writer.close()

    tls = await asyncio.start_server(on_tls, sock=listener, ssl=tls_ctx, ssl_handshake_timeout=60)
    print(json.dumps({"quic": quic._transport.get_extra_info("sockname")[1],
                      "tls": listener.getsockname()[1]}), flush=True)
    done = loop.create_future()

    def on_stdin():
        if not os.read(sys.stdin.fileno(), 4096) and not done.done():
            done.set_result(None)
    loop.add_reader(sys.stdin.fileno(), on_stdin)
    try:
        await done
    finally:
        tls.close()
        quic.close()


async def get_quic(port, cafile, size, timeout):
    from aioquic.asyncio import connect
    config = quic_configuration(True)
    config.load_verify_locations(cafile)
    result = {}
    finished = asyncio.Event()

    async def session():
        start = time.monotonic()
        got = 0
        async with connect("127.0.0.1", port, configuration=config) as conn:
            handshake = time.monotonic() - start
            reader, writer = await conn.create_stream()
            writer.write(b"GET\n")
            writer.write_eof()
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                got += len(chunk)
            result.update(seconds=time.monotonic() - start, handshake=handshake, bytes=got)
            finished.set()
            # leaving sends CONNECTION_CLOSE, then waits out the closing period (3 PTO): not waited for

    task = asyncio.ensure_future(session())
    waiter = asyncio.ensure_future(finished.wait())
    await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if not result:
        if task.done():
            task.result()  # its exception
        raise TimeoutError(f"no complete download in {timeout:.0f} s")
    await asyncio.wait({task}, timeout=0.3)  # time to send the CONNECTION_CLOSE
    for pending in (task, waiter):
        pending.cancel()
    return result


def get_tls(port, cafile, size, timeout):
    ctx = ssl.create_default_context(cafile=cafile)
    start = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    got = 0
    try:
        tls = ctx.wrap_socket(sock, server_hostname=SERVER_NAME)
        handshake = time.monotonic() - start
        tls.sendall(b"GET\n")
        while got < size:
            chunk = tls.recv(65536)
            if not chunk:
                break
            got += len(chunk)
        elapsed = time.monotonic() - start
        return {"seconds": elapsed, "handshake": handshake, "bytes": got, "tls": tls.version()}
    finally:
        sock.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--size", type=int, required=True)
    g = sub.add_parser("get")
    g.add_argument("proto", choices=["quic", "tls"])
    g.add_argument("--port", type=int, required=True)
    g.add_argument("--cafile", required=True)
    g.add_argument("--size", type=int, required=True)
    g.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    if a.cmd == "serve":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            asyncio.run(serve(a.cert, a.key, a.size))
        except KeyboardInterrupt:
            pass
        return
    try:
        if a.proto == "quic":
            result = asyncio.run(get_quic(a.port, a.cafile, a.size, a.timeout))
        else:
            result = get_tls(a.port, a.cafile, a.size, a.timeout)
        if result["bytes"] != a.size:
            result["error"] = f"{result['bytes']} of {a.size} bytes"
        print(json.dumps(result), flush=True)
        sys.exit(0 if "error" not in result else 1)
    except Exception as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
