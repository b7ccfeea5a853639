"""An app that saves five changes (at +0.2 s, +2.5 s, +3.5 s, +4.5 s, +5.5 s), each a POST to
$NETCOND_URL with an Idempotency-Key whose last number is the change's. Modes:
  queue  keeps what it could not send and sends it, oldest first, every 0.5 s until each is
         answered; a repeat carries the change's own key (change-N)
  drop   tries each change once, when it is made, and forgets it if that fails
  rekey  queues like `queue`, but makes a new key for every request (attempt-K-change-N), so a
         change whose answer was lost is created again
Ends once every change is answered (or dropped), or after 25 s."""
import json
import os
import sys
import time
import urllib.error
import urllib.request

MODE = sys.argv[1] if len(sys.argv) > 1 else "queue"
URL = os.environ["NETCOND_URL"]
MADE_AT = [0.2, 2.5, 3.5, 4.5, 5.5]
start = time.monotonic()
attempts = 0


def send(change):
    global attempts
    attempts += 1
    key = "attempt-%d-change-%d" % (attempts, change) if MODE == "rekey" else "change-%d" % change
    request = urllib.request.Request(URL, data=json.dumps({"change": change}).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Idempotency-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=3) as response:
            response.read()
        print("change %d sent (%s)" % (change, key), file=sys.stderr, flush=True)
        return True
    except (urllib.error.URLError, OSError) as error:
        print("change %d not sent: %s" % (change, error), file=sys.stderr, flush=True)
        return False


queue = []
made = 0
while time.monotonic() - start < 25:
    now = time.monotonic() - start
    while made < len(MADE_AT) and MADE_AT[made] <= now:
        made += 1
        queue.append(made)
    if MODE == "drop":
        for change in queue:
            if not send(change):
                print("change %d dropped" % change, file=sys.stderr, flush=True)
        queue = []
    else:
        while queue and send(queue[0]):
            queue.pop(0)
    if made == len(MADE_AT) and not queue:
        break
    time.sleep(0.5 if queue else 0.05)
sys.exit(0 if not queue else 1)
