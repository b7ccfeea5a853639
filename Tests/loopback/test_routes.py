"""Routes: conditions and faults per destination, behind the access link every connection shares.
Real curl meets the issue's own example under `netcond run`: the API as fast as under plain lte
(but its first two answers 503), the CDN a long, narrow path away, the ads host silent."""
import pytest

from conftest import run, write_profile

EXAMPLE = """\
extends: lte
routes:
  - match: {host: "cdn.netcond.test"}
    link: {latency: 300ms, bandwidth: 2Mbit}
  - match: {host: "ads.netcond.test"}
    outage: blackhole
  - match: {host: "api.netcond.test"}
    faults: [{status: 503, retry_after: 2s, first: 2}]
"""

# Each line: NAME CODE TIME_TO_FIRST_BYTE TOTAL BYTES (curl's own numbers).
SCRIPT = r"""
fetch() { curl -sS -m "$3" -o /dev/null -w "$1 %{http_code} %{time_starttransfer} %{time_total} %{size_download}\n" "$2"; echo "$1 rc $?"; }
fetch plain http://origin.netcond.test/bytes/1KB 30
for i in 1 2 3; do fetch api http://api.netcond.test/bytes/1KB 30; done
fetch cdn http://cdn.netcond.test/bytes/1KB 30
fetch bulk http://cdn.netcond.test/bytes/600KB 60
fetch ads http://ads.netcond.test/bytes/1KB 3
"""


def fetches(output):
    rows = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 5:
            rows.setdefault(parts[0], []).append((parts[1], float(parts[2]), float(parts[3]), int(parts[4])))
        elif len(parts) == 3 and parts[1] == "rc":
            rows.setdefault(parts[0] + " rc", []).append(int(parts[2]))
    return rows


ENGINES = [
    pytest.param([], id="proxy"),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_issue_example_per_destination(tmp, engine):
    profile = write_profile(tmp, "routes", EXAMPLE)
    assert run(["validate", profile]).returncode == 0
    result = run(["run", *engine, profile, "--", "sh", "-c", SCRIPT], timeout=180)
    rows = fetches(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    # The API: its first two answers are the route's 503, the third goes through.
    assert [code for code, *_ in rows["api"]] == ["503", "503", "200"], result.stdout
    plain_first_byte = rows["plain"][0][1]
    api_first_byte = rows["api"][2][1]
    cdn_first_byte = rows["cdn"][0][1]
    # The CDN: two round trips (the handshake, the request) each at least 600 ms longer than the
    # access link's alone; never earlier than that, whatever the machine's load.
    assert cdn_first_byte >= 1.2, result.stdout
    assert cdn_first_byte >= plain_first_byte + 1.0, result.stdout
    # The API is on the access link alone: nowhere near the CDN's path.
    assert api_first_byte < cdn_first_byte - 0.6, result.stdout
    # 600 KB through the CDN's 2 Mbit/s takes at least 600 KB at 250 KB/s (2.4 s) after its first byte.
    code, first_byte, total, size = rows["bulk"][0]
    assert code == "200" and size == 600 * 1024, result.stdout
    assert total - first_byte >= 600 * 1024 / 250_000 * 0.95, result.stdout
    # The ads host is blackholed: curl's own time-out (28), nothing received.
    assert rows["ads rc"] == [28] and rows["ads"][0][0] == "000", result.stdout
