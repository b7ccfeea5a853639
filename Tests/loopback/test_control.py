"""Live control: `netcond ctl` and the control API change a running proxy's conditions, and real
clients (curl) see the outage, the stall or the new profile."""
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

from conftest import NETCOND, curl, origin_bytes, run, status, wait_until, write_profile


def api(proxy, method, path, body=None):
    """A raw request to the control API: (status code, parsed JSON)."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    headers = {} if data is None else {"Content-Type": "application/json"}
    request = urllib.request.Request(proxy.control_url + path, data=data, method=method, headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_status_reports_profile_state_and_counters(proxy_factory):
    proxy = proxy_factory("lte")
    before = status(proxy)  # the fixture's readiness probe was a connection too
    assert curl(proxy, "-o", "/dev/null", "http://origin.netcond.test/bytes/10KB").returncode == 0
    now = status(proxy)
    assert now["profile"] == "lte" and now["phase"] == "lte"
    assert now["outage"] is None and now["stalled"] == []
    assert now["connections_total"] == before["connections_total"] + 1 and now["bytes_down"] > 10 * 1024
    assert now["seed"] == 1
    # 10 KB down in segments of at most 1460 bytes, and the request up; lte loses nothing.
    assert now["segments_sent"] - before["segments_sent"] >= 10 * 1024 // 1460 + 1 + 1
    assert now["segments_lost"] == 0 and now["retransmissions"] == 0
    text = proxy.ctl("status")
    assert text.returncode == 0 and text.stdout.startswith("lte · ") and "↓ 10." in text.stdout


def test_refuse_outage_turns_new_connections_away_and_ends(proxy_factory):
    proxy = proxy_factory("lte")
    assert proxy.ctl("outage", "refuse").returncode == 0
    refused = curl(proxy, "-o", "-", "-w", "%{http_code}", "http://origin.netcond.test/bytes/1KB")
    assert refused.returncode == 56 and refused.stdout == b"000"  # a reset, no answer of netcond's own
    tunnel = curl(proxy, "-p", "-o", "/dev/null", "http://origin.netcond.test/bytes/1KB")
    assert tunnel.returncode == 56 and b"502" not in tunnel.stderr
    socks = subprocess.run(["curl", "-sS", "-x", f"socks5h://127.0.0.1:{proxy.port}", "http://origin.netcond.test/"],
                           capture_output=True, timeout=60)
    assert socks.returncode == 97  # SOCKS5 reply 5: connection refused
    assert status(proxy)["refused_connections"] == 3
    assert proxy.ctl("outage", "end").returncode == 0
    after = curl(proxy, "http://origin.netcond.test/bytes/5KB?seed=3")
    assert after.returncode == 0 and after.stdout == origin_bytes(5 * 1024, seed=3)
    err = proxy.stop()[2]
    assert "link: lte, outage (refuse)" in err and "link: lte\n" in err


def test_reset_outage_resets_an_open_download(proxy_factory):
    proxy = proxy_factory("edge")
    download = subprocess.Popen(["curl", "-sS", "-x", proxy.url, "-o", "/dev/null",
                                 "http://origin.netcond.test/bytes/500KB"], stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: status(proxy)["bytes_down"] > 20_000)
        assert proxy.ctl("outage", "reset").returncode == 0
        assert download.wait(timeout=30) == 56  # curl: failure receiving data (connection reset)
        assert b"reset" in download.stderr.read().lower()
    finally:
        download.kill()
        download.wait()
    assert status(proxy)["resets"] == 1


def test_cut_ends_open_downloads_once_and_says_how_much_arrived(proxy_factory, tmp_path):
    proxy = proxy_factory("edge")
    out = tmp_path / "part.bin"
    reset = subprocess.Popen(["curl", "-sS", "-x", proxy.url, "-o", str(out),
                              "http://origin.netcond.test/bytes/500KB"], stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: status(proxy)["bytes_delivered"] > 20_000)
        assert proxy.ctl("cut").returncode == 0
        assert reset.wait(timeout=30) == 56  # curl: failure receiving data (connection reset)
        assert b"reset" in reset.stderr.read().lower()
    finally:
        reset.kill()
        reset.wait()
    now = status(proxy)
    assert now["resets"] == 1 and now["outage"] is None
    # The proxy's count of what reached the client is what curl kept (head included in the count).
    delivered = [e for e in api(proxy, "GET", "/events")[1]["events"] if e["kind"] == "delivered"]
    assert len(delivered) == 1 and delivered[0]["outcome"] == "reset"
    assert 0 < out.stat().st_size < delivered[0]["bytes"] < out.stat().st_size + 1024
    # The link stays up: the next download goes through whole.
    after = curl(proxy, "http://origin.netcond.test/bytes/2KB")
    assert after.returncode == 0 and after.stdout == origin_bytes(2048)

    closed = subprocess.Popen(["curl", "-sS", "-x", proxy.url, "-o", "/dev/null",
                               "http://origin.netcond.test/bytes/500KB"], stderr=subprocess.PIPE)
    try:
        assert wait_until(lambda: status(proxy)["bytes_delivered"] > now["bytes_delivered"] + 2048 + 20_000)
        assert proxy.ctl("cut", "close").returncode == 0
        assert closed.wait(timeout=30) == 18  # curl: transfer closed with bytes remaining
    finally:
        closed.kill()
        closed.wait()
    assert status(proxy)["closes"] == 1
    bad = proxy.ctl("cut", "sideways")
    assert bad.returncode == 2 and "unknown cut mode 'sideways'; allowed: reset, close" in bad.stderr


def test_blackhole_hangs_new_connections_until_it_ends(proxy_factory):
    proxy = proxy_factory("lte")
    assert proxy.ctl("outage", "blackhole").returncode == 0
    hung = curl(proxy, "--max-time", "2", "-o", "/dev/null", "http://origin.netcond.test/bytes/1KB")
    assert hung.returncode == 28  # timed out: nothing came back
    assert proxy.ctl("outage", "end").returncode == 0
    after = curl(proxy, "http://origin.netcond.test/bytes/2KB")
    assert after.returncode == 0 and after.stdout == origin_bytes(2048)


def test_a_stall_holds_the_bytes_and_loses_none(proxy_factory):
    proxy = proxy_factory("lte")
    assert proxy.ctl("stall", "down").returncode == 0
    download = subprocess.Popen(["curl", "-sS", "-x", proxy.url, "http://origin.netcond.test/bytes/64KB?seed=4"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.5)
        assert download.poll() is None, "the download finished during a stall"
        assert status(proxy)["stalled"] == ["down"]
        assert proxy.ctl("stall", "end").returncode == 0
        out, _ = download.communicate(timeout=30)
    finally:
        download.kill()
        download.wait()
    assert download.returncode == 0 and out == origin_bytes(64 * 1024, seed=4)


def test_switching_profile_live_changes_what_new_requests_see(proxy_factory, tmp):
    proxy = proxy_factory("none")
    assert proxy.ctl("profile", "edge").returncode == 0
    assert status(proxy)["profile"] == "edge"
    timed = curl(proxy, "-o", "/dev/null", "-w", "%{time_total}", "http://origin.netcond.test/bytes/1KB")
    # Two EDGE round trips (set-up, request): never earlier than 1.68 s.
    assert float(timed.stdout) >= 1.68
    mine = write_profile(tmp, "mine", "name: mine\nextends: none\ndown: {latency: 300ms}\n")
    assert proxy.ctl("profile", mine).returncode == 0
    assert status(proxy)["profile"] == "mine"
    broken = write_profile(tmp, "broken", "name: broken\ndown:\n  bandwith: 3kbit\n")
    bad = proxy.ctl("profile", broken)
    assert bad.returncode == 2 and f"{broken}:3" in bad.stderr and "bandwidth" in bad.stderr
    assert proxy.ctl("profile", "4g").returncode == 2
    assert status(proxy)["profile"] == "mine"


def test_bad_control_requests_get_400_with_a_reason_and_change_nothing(proxy_factory):
    proxy = proxy_factory("3g")
    before = status(proxy)
    cases = [
        ("POST", "/outage", {"behaviour": "explode"}, 400, "unknown behaviour 'explode'"),
        ("POST", "/outage", b"not json", 400, "expected a JSON object"),
        ("POST", "/stall", {"direction": "sideways"}, 400, "allowed: up, down, both"),
        ("POST", "/profile", {"name": "Profiles/edge.yaml"}, 400, "is a path"),
        ("POST", "/profile", {"yaml": "down: {loss: 140%}"}, 400, "profile.yaml:1"),
        ("GET", "/outage", None, 405, "allowed: POST or DELETE"),
        ("GET", "/nowhere", None, 404, "endpoints: /status"),
    ]
    for method, path, body, code, reason in cases:
        got, answer = api(proxy, method, path, body)
        assert got == code, (method, path, answer)
        assert reason in answer["error"], answer
    after = status(proxy)
    for key in ["profile", "phase", "outage", "stalled", "resets", "refused_connections"]:
        assert after[key] == before[key]
    # ctl checks values before sending and exits 2; an absent API is 3.
    assert proxy.ctl("outage", "explode").returncode == 2
    nothing = run(["ctl", "status", "--control", "http://127.0.0.1:1"])
    assert nothing.returncode == 3 and "no control API at http://127.0.0.1:1" in nothing.stderr


def test_a_program_under_run_controls_its_own_conditions():
    script = (
        'curl -s "$NETCOND_CONTROL/status" | grep -q \'"profile":"lte"\' || exit 10; '
        f'{NETCOND} ctl outage refuse >/dev/null || exit 11; '
        'curl -s -o /dev/null -w "%{http_code}\\n" http://origin.netcond.test/bytes/1KB; '
        f'{NETCOND} ctl outage end >/dev/null || exit 12; '
        'curl -s -o /dev/null -w "%{http_code}\\n" http://origin.netcond.test/bytes/1KB'
    )
    result = run(["run", "lte", "--", "sh", "-c", script])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["000", "200"]  # the refused one: a reset, no HTTP answer
    assert "link: lte, outage (refuse)" in result.stderr


def test_proxy_control_port_options(proxy_factory):
    proxy = proxy_factory("lte", ("--no-control",))
    rc, out, err = proxy.stop()
    assert "control API" not in out
    taken = proxy_factory("lte")
    clash = run(["proxy", "lte", "--listen", "127.0.0.1:0", "--control", f"127.0.0.1:{taken.port}"], timeout=30)
    assert clash.returncode == 3 and "cannot listen for control" in clash.stderr and "already in use" in clash.stderr
    both = run(["proxy", "lte", "--listen", "127.0.0.1:0", "--control", "0", "--no-control"], timeout=30)
    assert both.returncode == 2


def test_on_a_terminal_the_proxy_redraws_a_status_line():
    import pty
    import select
    import signal as signals
    pid, fd = pty.fork()
    if pid == 0:
        try:
            # Ports of its own choosing: one picked beforehand may be taken by another job meanwhile.
            os.execv(NETCOND, [NETCOND, "proxy", "lte", "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0"])
        finally:
            os._exit(127)
    output = b""
    try:
        deadline = time.time() + 15
        while time.time() < deadline and output.count(b"\r\x1b[K") < 3:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    output += os.read(fd, 4096)
                except OSError:
                    break
    finally:
        os.kill(pid, signals.SIGINT)
        exited = wait_until(lambda: os.waitpid(pid, os.WNOHANG)[0] == pid, seconds=15)
        if not exited:
            os.kill(pid, signals.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert exited, "netcond proxy did not stop on SIGINT"
    lines = [part.decode() for part in output.split(b"\r\x1b[K")[1:]]
    assert len(lines) >= 2, output
    assert lines[0] == "lte · 0 open"  # no rates before a second sample
    assert lines[1].startswith("lte · ↓ 0 bit/s ↑ 0 bit/s · 0 open"), lines


# Security (issue 15): the control API reads no file, stays on loopback, and refuses what a web page
# could send it. Every request below goes to 127.0.0.1; nothing is sent to any other address.

def test_the_api_reads_no_file_a_profile_names(proxy_factory, tmp):
    proxy = proxy_factory("3g")
    secret = write_profile(tmp, "secret", "root:$6$not-for-the-api:19000:0:99999:7:::\n")
    other = write_profile(tmp, "other", "name: other\nextends: edge\n")  # a valid profile: was switched to
    def phase(path):
        return f"schedule: {{phases: [{{name: p, for: 1s, use: {path}}}]}}\n"
    cases = [
        {"yaml": f"extends: {secret}\n"},
        {"yaml": "extends: /etc/shadow\n"},
        {"yaml": "extends: /etc/passwd\n"},
        {"yaml": f"extends: {other}\n"},
        {"yaml": "extends: ./secret.yaml\n", "file": os.path.join(tmp, "mine.yaml")},  # relative to 'file'
        {"yaml": phase(secret)},
        {"yaml": phase("/etc/passwd")},
        {"yaml": phase(other)},
        {"yaml": "extends: 3g\n" + phase("../" + os.path.basename(tmp) + "/other.yaml"),
         "file": os.path.join(tmp, "mine.yaml")},
        {"name": other},
    ]
    for body in cases:
        code, answer = api(proxy, "POST", "/profile", body)
        assert code == 400, (body, answer)
        assert "is a path" in answer["error"] and "not accepted over the control API" in answer["error"], answer
        assert "netcond ctl profile FILE" in answer["error"], answer
        assert "root:" not in answer["error"] and "not-for-the-api" not in answer["error"], answer
    assert status(proxy)["profile"] == "3g"
    # Built-in names are still fine in both keys.
    code, answer = api(proxy, "POST", "/profile", {"yaml": "name: mine\nextends: edge\n" + phase("3g")})
    assert code == 200 and answer["profile"] == "mine" and answer["phase"] == "p", answer


def test_ctl_resolves_a_profile_file_and_the_files_it_names_on_its_own_side(proxy_factory, tmp):
    proxy = proxy_factory("none")
    write_profile(tmp, "base", "name: base\nextends: edge\ndown: {latency: 700ms}\n")
    os.mkdir(os.path.join(tmp, "more"))
    write_profile(os.path.join(tmp, "more"), "tunnel", "name: tunnel\nextends: 3g\nup: {latency: 333ms}\n")
    mine = write_profile(tmp, "mine", (
        "name: mine\nextends: ./base.yaml\n"
        "schedule: {phases: [{name: underground, for: 10m, use: more/tunnel.yaml}]}\n"
    ))
    switched = proxy.ctl("profile", mine, "--json")  # the other files are found next to it
    assert switched.returncode == 0, switched.stderr
    answer = json.loads(switched.stdout)
    assert answer["profile"] == "mine" and answer["phase"] == "underground"


def test_ctl_switches_to_a_profile_with_a_trace_file_which_it_sends_whole(proxy_factory, tmp):
    # The control API reads no file; ctl reads the trace beside the profile and sends its times.
    proxy = proxy_factory("none")
    os.mkdir(os.path.join(tmp, "traces"))
    with open(os.path.join(tmp, "traces", "slow.trace"), "w") as f:
        f.write("10\n")  # one 1,500-byte opportunity every 10 ms: 1.2 Mbit/s
    traced = write_profile(tmp, "traced", "name: traced\ndown: {trace: traces/slow.trace, latency: 10ms}\n")
    switched = proxy.ctl("profile", traced, "--json")
    assert switched.returncode == 0, switched.stderr
    answer = json.loads(switched.stdout)
    assert answer["profile"] == "traced"
    # /status says what the link is now: the trace's 1.2 Mbit/s down, 10 ms; up unlimited.
    down, up = answer["link"]
    assert down == {"direction": "down", "rate_bps": 1200000, "delay_ms": 10, "loss": 0}, answer["link"]
    assert up["direction"] == "up" and up["rate_bps"] is None, answer["link"]
    started = time.monotonic()
    assert curl(proxy, "http://origin.netcond.test/bytes/150000").stdout == origin_bytes(150000)
    # 150 KB (plus headers) needs over 100 opportunities: at least 1.0 s on any machine.
    assert time.monotonic() - started >= 1.0


def raw(port, method, path, body=None, headers=None):
    """A request to 127.0.0.1:port with exactly these headers (Host included when given):
    (status code, parsed JSON)."""
    import http.client
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def loopback_port_pair():
    """A port P with P and P + 1 both free on every interface (the proxy and its default control port)."""
    import random
    import socket
    # Random ports, not the kernel's pick: bind(0) gives even ports, and P + 1 (odd) is where the
    # kernel puts outgoing connections, which another job on the machine may hold by the thousand.
    for _ in range(200):
        port = random.randrange(20000, 32000)
        try:
            with socket.socket() as first, socket.socket() as second:
                first.bind(("0.0.0.0", port))
                second.bind(("0.0.0.0", port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError("no two free ports in a row")


def test_control_stays_on_loopback_when_the_proxy_listens_on_every_interface():
    import select
    import signal as signals
    # The pair is free a moment before netcond binds it: when another job took one meanwhile
    # (netcond exits saying so), again with another pair.
    for attempt in range(3):
        port = loopback_port_pair()
        process = subprocess.Popen([NETCOND, "proxy", "lte", "--listen", f"0.0.0.0:{port}"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        output = ""
        deadline = time.time() + 20
        while time.time() < deadline and "control API on" not in output and process.poll() is None:
            ready, _, _ = select.select([process.stdout], [], [], 0.5)
            if ready:
                output += os.read(process.stdout.fileno(), 65536).decode()
        if "control API on" in output or process.poll() is None or attempt == 2:
            break
        error = process.communicate()[1].decode()
        if "already in use" not in error:
            break
    try:
        assert f"control API on http://127.0.0.1:{port + 1} " in output, output
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port + 1}"], capture_output=True, text=True).stdout
        assert listening.split()[3] == f"127.0.0.1:{port + 1}" and len(listening.splitlines()) == 1, listening
        assert raw(port + 1, "GET", "/status")[0] == 200
    finally:
        process.send_signal(signals.SIGINT)
        try:
            err = process.communicate(timeout=10)[1].decode()
        except subprocess.TimeoutExpired:
            process.kill()
            err = process.communicate()[1].decode()
    # One warning, for the proxy: LAN clients reach the host's loopback services through it.
    assert f"warning: the proxy listens on 0.0.0.0:{port}, not only on loopback: LAN clients" in err, err
    assert "loopback services" in err and "control API listens" not in err, err

def test_the_api_refuses_what_a_web_page_could_send(proxy_factory):
    proxy = proxy_factory("lte")
    port = proxy.control_port
    json_type = {"Content-Type": "application/json"}
    outage = json.dumps({"behaviour": "reset"})
    refused = [
        # DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 reads the answers.
        ("GET", "/status", None, {"Host": "evil.example"}, 403, "Host 'evil.example'"),
        ("GET", "/events", None, {"Host": f"evil.example:{port}"}, 403, "allowed: localhost"),
        ("POST", "/outage", outage, {"Host": "rebind.127.0.0.1.nip.io", **json_type}, 403, "Host"),
        # A page anywhere posting to http://127.0.0.1:PORT (CSRF).
        ("POST", "/outage", outage, {"Origin": "http://evil.example", **json_type}, 403, "Origin 'http://evil.example'"),
        ("POST", "/outage", outage, {"Origin": "null", **json_type}, 403, "Origin 'null'"),
        ("POST", "/outage", outage, {"Origin": "http://127.0.0.1.evil.example", **json_type}, 403, "Origin"),
        ("POST", "/outage", outage, {"Content-Type": "text/plain"}, 415, "allowed: application/json"),
        ("POST", "/outage", outage, {"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type"),
        ("POST", "/outage", outage, {}, 415, "no Content-Type"),
        ("POST", "/cut", None, {}, 415, "no Content-Type"),  # fetch(url, {method: 'POST', mode: 'no-cors'})
        ("POST", "/faults", "{status: 503}", {"Content-Type": "text/plain"}, 415, "application/yaml"),
    ]
    for method, path, body, headers, code, reason in refused:
        got, answer = raw(port, method, path, body, headers)
        assert got == code and reason in answer["error"], (method, path, headers, got, answer)
    now = status(proxy)
    assert now["outage"] is None and now["resets"] == 0 and now["faults"] == 0
    allowed = [
        ("GET", "/status", None, {"Host": f"localhost:{port}"}),
        ("GET", "/status", None, {"Host": f"[::1]:{port}"}),
        ("GET", "/status", None, {"Host": f"127.0.0.1:{port}", "Origin": "http://localhost:3000"}),
        ("POST", "/stall", json.dumps({"direction": "up"}), {"Content-Type": "application/json; charset=utf-8"}),
        ("DELETE", "/stall", None, {}),
        ("POST", "/faults", "{status: 503, first: 1}", {"Content-Type": "application/yaml"}),
        ("POST", "/cut", None, json_type),
    ]
    for method, path, body, headers in allowed:
        got, answer = raw(port, method, path, body, headers)
        assert got == 200, (method, path, headers, answer)
    assert status(proxy)["faults"] == 1


def test_half_sent_requests_do_not_lock_ctl_out(proxy_factory):
    """128 connections that each send a request head promising a body and never send it hold no
    place a whole request needs: `netcond ctl status` answers at once (it waited for the 60 s
    time-out before)."""
    import socket
    proxy = proxy_factory("lte")
    port = int(proxy.control_url.rsplit(":", 1)[1])
    held = []
    try:
        for _ in range(128):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"POST /outage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
            held.append(s)
        time.sleep(0.5)  # every head has arrived
        began = time.monotonic()
        r = subprocess.run([NETCOND, "ctl", "status", "--control", proxy.control_url], capture_output=True, text=True, timeout=30)
        took = time.monotonic() - began
        assert r.returncode == 0, r.stderr
        assert took < 10, f"ctl took {took:.1f}s"  # 2 s on a quiet machine; 60 s when locked out
    finally:
        for s in held:
            s.close()


def test_the_client_under_test_cannot_change_its_scenarios_conditions(tmp_path):
    """During a scenario the control API answers the client's reads and refuses its changes (403):
    a client switching its own conditions to none would judge itself. A change from outside, with
    the token netcond printed (never in the client's environment), is made, and every verdict says so."""
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(
        "name: slow\nprofile: edge\n"
        "origin: {files: {big.bin: {size: 60KB, seed: 1}}}\n"
        "client: {url: /files/big.bin, output: big.bin, deadline: 60s}\n"
        "checks: {completes: {}}\n")
    hostile = (
        'env | grep -q NETCOND_CONTROL_TOKEN && exit 9; '
        'curl -s -o /dev/null -w "%{http_code}\\n" "$NETCOND_CONTROL/status"; '
        'curl -s -o /dev/null -w "%{http_code}\\n" -X POST -H "Content-Type: application/json" '
        '-d \'{"name": "none"}\' "$NETCOND_CONTROL/profile"; '
        f'{NETCOND} ctl profile none >/dev/null 2>&1; echo "ctl $?"; '
        'curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"; '
        'curl -s "$NETCOND_CONTROL/status"'
    )
    r = run(["run", str(scenario), "--seed", "1", "--", "sh", "-c", hostile], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.split("\n")
    assert lines[:3] == ["200", "403", "ctl 2"], r.stdout
    assert '"profile":"edge"' in r.stdout and '"profile":"none"' not in r.stdout, r.stdout
    assert "changed from outside" not in r.stdout + r.stderr
    assert "--token" in r.stderr

    # From outside, with the token: done, and the verdict says so.
    process = subprocess.Popen([NETCOND, "run", str(scenario), "--seed", "1", "--", "sh", "-c",
                                'sleep 2; curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        told = ""
        deadline = time.monotonic() + 60
        while "--token" not in told and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            told += line
        words = told.split()
        url = words[words.index("--control") + 1]
        token = words[words.index("--token") + 1]
        changed = subprocess.run([NETCOND, "ctl", "outage", "reset", "--control", url, "--token", token],
                                 capture_output=True, text=True, timeout=30)
        assert changed.returncode == 0, changed.stderr
        ended = subprocess.run([NETCOND, "ctl", "outage", "end", "--control", url],
                               env={**os.environ, "NETCOND_CONTROL_TOKEN": token}, capture_output=True, text=True, timeout=30)
        assert ended.returncode == 0, ended.stderr
        out, err = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert "changed from outside the scenario" in out, out + err
    assert "POST /outage" in out and "DELETE /outage" in out, out
