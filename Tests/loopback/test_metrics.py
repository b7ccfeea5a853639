"""`GET /metrics` on the control API (`netcond proxy`) and on the Toxiproxy API (`netcond toxiproxy`):
real bytes pass, the exposition passes Prometheus's own `promtool check metrics`, and a real
Prometheus server scraping it sees a counter that moved. promtool and prometheus come from Debian's
`prometheus` package (scripts/test installs it); a test that needs one is skipped without it."""
import contextlib
import os
import json
import re
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import urllib.request

import pytest

from conftest import NETCOND, EchoServer, curl, free_port, stop_process, wait_until, write_profile

ROUTED = """\
extends: lte
routes:
  - match: {host: "cdn.netcond.test"}
    link: {latency: 20ms}
"""

# Only loopback: no proxy between the test and what it scrapes.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(url, timeout=10):
    """(status, content type, body text) of a GET."""
    with OPENER.open(url, timeout=timeout) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read().decode()


def samples(text):
    """{(name, ((label, value), ...)): value} of an exposition (labels sorted)."""
    found = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)', line)
        assert match, line
        labels = tuple(sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(2) or "")))
        found[(match.group(1), labels)] = float(match.group(3))
    return found


def value(text, name, **labels):
    return samples(text).get((name, tuple(sorted(labels.items()))))


def promtool_check(text):
    """`promtool check metrics` on the exposition: it must report nothing (no error, no lint)."""
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian's prometheus package; scripts/test installs it)")
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "" and result.stderr.strip() == "", (
        result.stdout + result.stderr + "\n" + text)


@contextlib.contextmanager
def prometheus_scraping(target, metrics_path="/metrics"):
    """A real Prometheus on a free loopback port, scraping `target` (host:port) every second, its
    storage in a folder of its own; stopped and the folder removed after. Yields its URL."""
    binary = shutil.which("prometheus")
    if not binary:
        pytest.skip("prometheus is not installed (Debian's prometheus package; scripts/test installs it)")
    folder = tempfile.mkdtemp(prefix="netcond-prometheus-")
    config = f"{folder}/prometheus.yml"
    with open(config, "w") as f:
        f.write(f"""\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: netcond
    metrics_path: {metrics_path}
    static_configs:
      - targets: ["{target}"]
""")
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={folder}/data",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"

    def ready():
        try:
            return get(url + "/-/ready", timeout=2)[0] == 200
        except OSError:
            return proc.poll() is not None
    try:
        assert wait_until(ready, seconds=30) and proc.poll() is None, "prometheus did not start"
        yield url
    finally:
        stop_process(proc)
        if proc.returncode not in (0, -15):
            print(proc.stderr.read())
        shutil.rmtree(folder, ignore_errors=True)


def query(url, expression):
    """The first value Prometheus's HTTP API answers for an instant query (None: no series yet)."""
    status, _, body = get(url + "/api/v1/query?query=" + urllib.parse.quote(expression))
    result = json.loads(body)
    assert status == 200 and result["status"] == "success", body
    found = result["data"]["result"]
    return float(found[0]["value"][1]) if found else None


def prometheus_sees(url, expression, seconds=30):
    """Polls Prometheus (at most `seconds`) until `expression` has a value above 0."""
    seen = []

    def above_zero():
        seen.append(query(url, expression))
        return seen[-1] is not None and seen[-1] > 0
    assert wait_until(above_zero, seconds=seconds), f"{expression}: {seen[-5:]}"
    return seen[-1]


def test_control_metrics_count_real_bytes_pass_promtool_and_reach_prometheus(proxy_factory, tmp):
    proxy = proxy_factory(write_profile(tmp, "routed", ROUTED))
    status, content_type, before = get(proxy.control_url + "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    assert "# TYPE netcond_bytes_total counter" in before and "# HELP netcond_bytes_total " in before
    down_before = value(before, "netcond_bytes_total", direction="down")
    assert curl(proxy, "-o", "/dev/null", "http://origin.netcond.test/bytes/100KB").returncode == 0
    assert curl(proxy, "-o", "/dev/null", "http://cdn.netcond.test/bytes/20KB").returncode == 0
    after = get(proxy.control_url + "/metrics")[2]
    # The same counters as /status and /routes, read at the scrape.
    assert value(after, "netcond_bytes_total", direction="down") - down_before >= 120 * 1024, after
    assert value(after, "netcond_route_bytes_total", route="cdn.netcond.test", direction="down") >= 20 * 1024, after
    assert value(after, "netcond_route_delay_seconds", route="cdn.netcond.test", direction="down") == 0.02, after
    assert value(after, "netcond_packets_sent_total", direction="down") > 100 * 1024 / 1460, after
    assert value(after, "netcond_packets_sent_total", direction="up") > 0, after
    assert value(after, "netcond_connections_total") >= 2 and value(after, "netcond_connections_open") is not None
    # Nothing of a routed link is spliced (the kernel relays only forwards with nothing to shape).
    assert value(after, "netcond_spliced_connections_total") == 0, after
    assert value(after, "netcond_spliced_connections_open") == 0, after
    for cause in ("loss", "queue_overflow", "outage"):
        assert value(after, "netcond_dropped_packets_total", cause=cause, direction="down") is not None, after
    assert value(after, "netcond_link_delay_seconds", direction="down") > 0
    assert value(after, "netcond_link_info", engine="proxy", phase="routed", profile="routed") == 1, after
    promtool_check(after)

    with prometheus_scraping(f"127.0.0.1:{proxy.control_port}") as prometheus:
        seen = prometheus_sees(prometheus, 'netcond_bytes_total{direction="down"}')
        assert seen >= 120 * 1024
        assert curl(proxy, "-o", "/dev/null", "http://origin.netcond.test/bytes/50KB").returncode == 0
        # The counter moves as bytes pass: Prometheus sees the 50 KB more.
        assert wait_until(lambda: (query(prometheus, 'netcond_bytes_total{direction="down"}') or 0)
                          >= seen + 50 * 1024, seconds=30)


def test_metrics_is_get_only_and_listed_among_the_endpoints(proxy_factory):
    proxy = proxy_factory("lte")
    request = urllib.request.Request(proxy.control_url + "/metrics", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        OPENER.open(request, timeout=10)
    assert refused.value.code == 405 and "allowed: GET /metrics" in json.loads(refused.value.read())["error"]
    with pytest.raises(urllib.error.HTTPError) as missing:
        OPENER.open(proxy.control_url + "/nowhere", timeout=10)
    assert missing.value.code == 404 and "/metrics" in json.loads(missing.value.read())["error"]


def toxiproxy_api(port, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with OPENER.open(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def test_toxiproxy_metrics_name_bytes_as_toxiproxy_and_reach_prometheus():
    proc = subprocess.Popen([NETCOND, "toxiproxy", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    echo = EchoServer()
    try:
        line = proc.stdout.readline()
        found = re.search(r"Toxiproxy API on http://127\.0\.0\.1:(\d+)", line)
        assert found, line + (proc.stderr.read() if proc.poll() is not None else "")
        api = int(found.group(1))
        upstream = f"127.0.0.1:{echo.port}"
        created = toxiproxy_api(api, "POST", "/proxies", {"name": "echo", "upstream": upstream,
                                                          "listen": "127.0.0.1:0"})
        listen = created["listen"]
        toxiproxy_api(api, "POST", "/proxies/echo/toxics",
                      {"name": "slow", "type": "latency", "stream": "downstream", "attributes": {"latency": 10}})
        payload = b"x" * 50_000
        with socket.create_connection(("127.0.0.1", int(listen.rsplit(":", 1)[1])), timeout=10) as client:
            client.sendall(payload)
            got = b""
            while len(got) < len(payload):
                chunk = client.recv(65536)
                assert chunk, f"the echo ended after {len(got)} bytes"
                got += chunk
        assert got == payload
        status, content_type, text = get(f"http://127.0.0.1:{api}/metrics")
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
        labels = {"proxy": "echo", "listener": listen, "upstream": upstream}
        for name in ("toxiproxy_proxy_received_bytes_total", "toxiproxy_proxy_sent_bytes_total"):
            assert f"# TYPE {name} counter" in text
            for direction in ("upstream", "downstream"):
                assert value(text, name, direction=direction, **labels) == len(payload), text
        promtool_check(text)

        with prometheus_scraping(f"127.0.0.1:{api}") as prometheus:
            seen = prometheus_sees(
                prometheus, 'toxiproxy_proxy_sent_bytes_total{direction="downstream",proxy="echo"}')
            assert seen == len(payload)
    finally:
        echo.close()
        stop_process(proc)


FIRST = """\
name: metrics-first
profile: lte
origin:
  files:
    a.bin: {size: 20KB, seed: 1}
client:
  command: sh -c 'curl -fsS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'
  url: /files/a.bin
  output: a.bin
  deadline: 30s
checks:
  completes: {}
"""

# The second scenario's client scrapes its own run's /metrics (to METRICS_OUT) after its download.
SECOND = FIRST.replace("metrics-first", "metrics-second").replace(
    """'curl -fsS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'""",
    """'curl -fsS -o "$NETCOND_OUTPUT" "$NETCOND_URL" && curl -fsS --noproxy "*" -o "$METRICS_OUT" "$NETCOND_CONTROL/metrics"'""")


def test_a_suites_next_scenario_scrapes_how_the_last_ones_checks_went(tmp_path):
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "a-first.yaml").write_text(FIRST)
    (folder / "b-second.yaml").write_text(SECOND)
    out = tmp_path / "metrics.txt"
    result = subprocess.run([NETCOND, "test", str(folder), "--seed", "3"], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "METRICS_OUT": str(out)})
    assert result.returncode == 0, result.stdout + result.stderr
    text = out.read_text()
    assert value(text, "netcond_scenario_check_passed", scenario="metrics-first", check="completes") == 1, text
    assert value(text, "netcond_scenario_checks", result="passed") == 1, text
    assert value(text, "netcond_scenario_checks", result="failed") == 0, text
    # Its own run's bytes so far: the 20 KB it has just downloaded.
    assert value(text, "netcond_bytes_total", direction="down") >= 20 * 1024, text
    promtool_check(text)


def test_the_packet_engines_control_api_serves_the_same_metrics(tmp_path):
    from conftest import packet_engine_missing
    missing = packet_engine_missing()
    if missing:
        pytest.skip(missing)
    out = tmp_path / "metrics.txt"
    script = ('curl -fsS -o /dev/null "$NETCOND_ORIGIN/bytes/200000" && '
              f'curl -fsS --noproxy "*" -o {out} "$NETCOND_CONTROL/metrics"')
    result = subprocess.run([NETCOND, "run", "--engine", "packet", "--seed", "3", "lte", "--", "sh", "-c", script],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert value(text, "netcond_link_info", engine="packet", phase="lte", profile="lte") == 1, text
    assert value(text, "netcond_bytes_total", direction="down") >= 200_000, text
    for direction in ("down", "up"):
        assert value(text, "netcond_packets_sent_total", direction=direction) > 0, text
        assert value(text, "netcond_dropped_packets_total", cause="loss", direction=direction) == 0, text
    assert value(text, "netcond_link_rate_bytes_per_second", direction="down") > 0, text
    promtool_check(text)
