"""A hand-rolled resuming download (requests, stream=True), as apps write them: after a drop it asks
for the rest with Range and appends. With "careful" it first checks that the answer is the file (206
for a range, not an HTML page); without, it appends whatever comes back."""
import os, sys, time, requests
url, out = os.environ["NETCOND_URL"], os.environ["NETCOND_OUTPUT"]
CAREFUL = sys.argv[1:] == ["careful"]
for attempt in range(30):
    have = os.path.getsize(out) if os.path.exists(out) else 0
    headers = {"Range": "bytes=%d-" % have} if have else {}
    try:
        with requests.get(url, headers=headers, stream=True, timeout=10) as r:
            wanted = 206 if have else 200
            if CAREFUL and (r.status_code != wanted or "html" in r.headers.get("Content-Type", "")):
                print("not the file (HTTP %d, %s); trying again" % (r.status_code, r.headers.get("Content-Type")), file=sys.stderr)
                time.sleep(1)
                continue
            with open(out, "ab") as f:
                for chunk in r.iter_content(65536):
                    f.write(chunk)
        break
    except requests.RequestException as e:
        print("attempt %d: %s" % (attempt + 1, e), file=sys.stderr)
        time.sleep(1)
