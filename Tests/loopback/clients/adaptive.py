"""A download that sets its own time-out, as apps do. "estimate": it measures the first 3 s and
allows twice the time the rest would take at that rate (a time-out fitted to the link it first
saw). "progress": it gives up only after 10 s without a byte (its socket's read time-out). Either says
why it gives up."""
import os, socket, sys, time, urllib.request
url, out = os.environ["NETCOND_URL"], os.environ["NETCOND_OUTPUT"]
mode = sys.argv[1]
started = time.monotonic()
got, budget = 0, None
with urllib.request.urlopen(url, timeout=10) as r, open(out, "wb") as f:
    total = int(r.headers["Content-Length"])
    while got < total:
        try:
            chunk = r.read1(16384)
        except socket.timeout:
            sys.exit(f"gave up: no byte for 10 s ({got} of {total} bytes)")
        if not chunk:
            break
        f.write(chunk)
        got += len(chunk)
        now = time.monotonic()
        if mode == "estimate" and budget is None and now - started >= 3:
            rate = got / (now - started)
            budget = (now - started) + 2 * (total - got) / rate
            print(f"{rate * 8 / 1000:.0f} kbit/s over the first {now - started:.1f} s: allowing {budget:.1f} s in all", file=sys.stderr)
        if budget is not None and now - started > budget:
            sys.exit(f"gave up after {now - started:.1f} s: {got} of {total} bytes, slower than the {budget:.1f} s allowed")
print(f"{got} bytes in {time.monotonic() - started:.1f} s", file=sys.stderr)
