"""Plain loopback servers that produce a network fault without netcond, so a test can watch a real
client meet the fault directly first and then through netcond, and compare.

Every server counts the requests (or connections) that reached it, runs in a daemon thread and is
closed by the test that made it (use it as a context manager)."""
import socket
import threading


class _Server:
    def __init__(self, backlog=64):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        self.connections = 0
        self.lock = threading.Lock()
        self.closed = False

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.closed = True
        self.sock.close()


class RequestServer(_Server):
    """Reads each request head and body (Content-Length) and counts it. `mode`: `answer` (200 with a
    small body, then close), `drop` (close without answering: the response is lost) or `reset`
    (the same with a TCP reset instead of a FIN)."""

    def __init__(self, mode="answer"):
        super().__init__()
        assert mode in ("answer", "drop", "reset")
        self.mode = mode
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        with conn:
            conn.settimeout(10)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                while len(body) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    body += chunk
            except OSError:
                return
            with self.lock:
                self.requests += 1
            if self.mode == "answer":
                try:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
                except OSError:
                    pass
            elif self.mode == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


class BlackholeServer(_Server):
    """A listener that completes no handshake: its accept queue (backlog 0) is kept full by one
    connection of its own, so the kernel drops every other SYN, as a network that swallows them
    does. A client's connect hangs until its own time-out. Nothing is ever accepted, so
    `requests` stays 0 by construction; `plug` is the connection that fills the queue."""

    def __init__(self):
        super().__init__(backlog=0)
        self.plug = socket.create_connection(("127.0.0.1", self.port), timeout=2)

    def close(self):
        self.plug.close()
        super().close()
