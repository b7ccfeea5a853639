"""Scenarios on real clients: each check passes on a client that behaves well and fails on one that
does not, with no cooperation from the clients (they only read NETCOND_URL / NETCOND_OUTPUT)."""
import glob
import json
import re
import os
import textwrap

from conftest import run

SCENARIOS = os.path.join(os.path.dirname(__file__), "..", "..", "Scenarios")
WGET = 'wget -q -O "$NETCOND_OUTPUT" "$NETCOND_URL"'
CURL = 'curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'


def scenario(name, client, extra=(), timeout=120, env=None):
    return run(["run", os.path.join(SCENARIOS, name + ".yaml"), "--seed", "3", *extra, "--", "sh", "-c", client],
               timeout=timeout, env=env)


def line(result, check):
    """The report line of one check ('✓ resumes — …')."""
    found = [l for l in result.stdout.splitlines() if l[2:].startswith(check + " —")]
    assert len(found) == 1, (result.stdout, result.stderr)
    return found[0]


def test_wget_resumes_after_a_dropout_and_curl_starts_nothing_again():
    good = scenario("resume-after-dropout", WGET)
    assert good.returncode == 0, good.stdout + good.stderr
    assert line(good, "resumes").startswith("✓")
    assert "cut at 614,400 → Range: bytes=614400-" in line(good, "resumes")
    assert "2,097,152 bytes identical to /files/big.bin" in line(good, "completes")
    assert "resume-after-dropout passed" in good.stderr

    bad = scenario("resume-after-dropout", CURL)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert line(bad, "resumes").startswith("✗")
    assert "never asked again" in line(bad, "resumes")
    assert "exit 18" in line(bad, "completes")
    # A failing run says how to repeat it, seed included.
    assert "repeat with: netcond run " in bad.stderr and "--seed 3 -- sh -c" in bad.stderr


def test_a_client_that_retries_from_zero_fails_resumes():
    # python requests with urllib3's Retry reconnects after the cut, but asks for the whole file again.
    client = textwrap.dedent("""
        import os, requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry
        s = requests.Session()
        s.mount("http://", HTTPAdapter(max_retries=Retry(total=3, backoff_factor=0.1)))
        for attempt in range(3):
            try:
                r = s.get(os.environ["NETCOND_URL"], timeout=30)
                open(os.environ["NETCOND_OUTPUT"], "wb").write(r.content)
                break
            except requests.exceptions.RequestException as e:
                print("retrying:", e)
    """)
    bad = scenario("resume-after-dropout", f"python3 -c '{client}'")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "asked for the whole file again (no Range" in line(bad, "resumes")


def test_three_link_resets_in_a_row():
    # The link resets the connection wherever the transfer is: wget asks for exactly what it has,
    # which is what the proxy counted as delivered (not what the origin wrote into socket buffers).
    good = scenario("resume-after-reset-storm", WGET)
    assert good.returncode == 0, good.stdout + good.stderr
    resumes = line(good, "resumes")
    cuts = re.findall(r"cut at ([\d,]+) → Range: bytes=(\d+)- \([^)]*the link reset it\)", resumes)
    assert len(cuts) == 3, resumes
    marks = [int(had.replace(",", "")) for had, _ in cuts]
    assert all(int(had.replace(",", "")) == int(start) for had, start in cuts), resumes
    assert marks[0] >= 299 * 1024 and marks == sorted(marks) and marks[2] < 2 * 1024 * 1024, resumes
    assert "2,097,152 received for a 2,097,152 file (1.00×)" in resumes

    bad = scenario("resume-after-reset-storm", 'curl -sS --retry 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r"cut at byte [\d,]+ \(\+[\d.]+s; the link reset it\), and the client never asked again", line(bad, "resumes"))
    assert "Connection reset by peer" in bad.stdout + bad.stderr


def test_curl_honours_retry_after_and_wget_in_a_tight_loop_does_not():
    good = scenario("backoff-503-retry-after", 'curl -sS --retry 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert good.returncode == 0, good.stdout + good.stderr
    assert line(good, "backs-off").startswith("✓")
    assert "(Retry-After 2 s)" in line(good, "backs-off")

    bad = scenario("backoff-503-retry-after",
                   'wget -q --tries=10 --waitretry=0 --retry-on-http-error=503 -O "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert line(bad, "backs-off").startswith("✗")
    assert "after a Retry-After: 2" in line(bad, "backs-off")
    # It did get the file in the end: only the manners fail.
    assert line(bad, "completes").startswith("✓")


def test_deadline_stops_a_hanging_client_and_fails_completes(tmp_path):
    path = tmp_path / "hang.yaml"
    path.write_text(textwrap.dedent("""
        description: the origin never answers; the client has 5 s
        profile: none
        origin:
          files: {slow.bin: {size: 1KB}}
          faults: [{file: slow.bin, hang: true}]
        client: {url: /files/slow.bin, output: slow.bin, deadline: 5s}
        checks:
          completes: {}
    """))
    env = {"TMPDIR": str(tmp_path)}
    hung = run(["run", str(path), "--seed", "1", "--", "sh", "-c", CURL], timeout=60, env=env)
    assert hung.returncode == 1, hung.stdout + hung.stderr
    assert "still running at its 5 s deadline" in line(hung, "completes")
    patient = run(["run", str(path), "--seed", "1", "--", "sh", "-c", 'curl -sS --max-time 1 -o "$NETCOND_OUTPUT" "$NETCOND_URL"'],
                  timeout=60, env=env)
    assert patient.returncode == 1
    assert "exit 28" in line(patient, "completes")
    # No working directory is left behind.
    assert not glob.glob(str(tmp_path / "netcond-*"))


def test_command_from_the_file_and_keep(tmp_path):
    path = tmp_path / "own.yaml"
    path.write_text(textwrap.dedent("""
        profile: lte
        origin: {files: {a.bin: {size: 100KB, seed: 5}}}
        client:
          command: curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL" && test "$PWD" = "$NETCOND_WORKDIR"
          url: /files/a.bin
          output: a.bin
        checks: {completes: {}}
    """))
    r = run(["run", str(path), "--keep"], timeout=60, env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    kept = [l for l in r.stderr.splitlines() if "working directory kept:" in l]
    assert kept and os.path.getsize(os.path.join(kept[0].split(": ", 2)[-1], "a.bin")) == 100 * 1024


def test_the_client_runs_in_its_directory_and_writes_to_the_fresh_one(tmp_path):
    (tmp_path / "client").mkdir()
    script = tmp_path / "client" / "get.sh"
    script.write_text('#!/bin/sh\ntest -f ./get.sh && curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"\n')
    script.chmod(0o755)
    path = tmp_path / "own.yaml"
    path.write_text(textwrap.dedent("""
        profile: lte
        origin: {files: {a.bin: {size: 50KB, seed: 5}}}
        client: {command: ./get.sh, directory: client, url: /files/a.bin, output: a.bin}
        checks: {completes: {}}
    """))
    r = run(["run", str(path)], timeout=60, env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / "client" / "a.bin").exists()


def test_bad_scenarios_are_usage_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("profile: lte\nclient: {url: /files/x.bin}\nchecks:\n  complete: {}\n")
    r = run(["run", str(bad), "--", "true"])
    assert r.returncode == 2
    assert f"{bad}:4:3: checks.complete: unknown key 'complete'; did you mean 'completes'" in r.stderr
    nocommand = tmp_path / "nocommand.yaml"
    nocommand.write_text("profile: lte\nchecks: {completes: {}}\n")
    r = run(["run", str(nocommand)])
    assert r.returncode == 2
    assert "names no client command" in r.stderr
    r = run(["run", str(nocommand), "--", "no-such-program-netcond"])
    assert r.returncode == 127


def test_test_lists_every_error_of_every_scenario_one_a_line(tmp_path):
    (tmp_path / "a.yaml").write_text("profile: edgee\nengine: warp\nchecks: {completes: {}}\n")
    (tmp_path / "b.yaml").write_text("profile: edge\nchecks: {completes: {}}\ncolour: blue\n")
    r = run(["test", str(tmp_path), "--", "true"])
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert [line.split(": ", 2)[1] for line in lines if ".yaml:" in line] == [
        f"{tmp_path / 'a.yaml'}:1:10", f"{tmp_path / 'a.yaml'}:2:9", f"{tmp_path / 'b.yaml'}:3:1"], r.stderr
    assert "\\n" not in r.stderr
    assert lines[-1] == "netcond: 2 scenario files cannot be used; nothing was run", r.stderr


def test_validate_checks_scenarios_too(tmp_path):
    shipped = sorted(glob.glob(os.path.join(SCENARIOS, "*.yaml")))
    assert len(shipped) >= 3
    r = run(["validate", *shipped])
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("(scenario ") == len(shipped)
    bad = tmp_path / "bad.yaml"
    bad.write_text("profile: edge\nchecks: {resumes: {}}\n")
    r = run(["validate", str(bad)])
    assert r.returncode == 2
    assert f"{bad}:2:19: checks.resumes: which file?" in r.stderr


def test_validate_shows_a_misspelt_extends_and_check_name_with_the_other_errors(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: 3gg\ndown: {latency: 10 parsecs}\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("profile: edge\nclient: {deadline: 5 years}\nchecks:\n  complete: {}\n")
    r = run(["validate", str(profile), str(scenario)])
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f"netcond: {profile}:1:10: extends: unknown profile '3gg'; did you mean '3g'?"), r.stderr
    assert lines[1].startswith(f"netcond: {profile}:2:17: down.latency: unknown unit 'parsecs'"), r.stderr
    assert lines[2].startswith(f"netcond: {scenario}:2:20: client.deadline: unknown unit 'years'"), r.stderr
    assert lines[3].startswith(f"netcond: {scenario}:4:3: checks.complete: unknown key 'complete'; did you mean 'completes'?")


def test_demo_tells_the_two_clients_apart(tmp_path):
    shown = run(["demo", "--show-scenario"])
    assert shown.returncode == 0 and "cut_after: 40KB" in shown.stdout
    r = run(["demo", "--seed", "1"], timeout=120, env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    first, second = r.stdout.split("\n2. ")
    assert "✗ resumes — cut at byte 40,960; the next request asked for the whole file again" in first
    assert "✓ resumes — cut at 40,960 → Range: bytes=40960-" in second
    assert "client: attempt 2, asking for the rest (Range: bytes=40960-)" in second
    assert "98,304 bytes identical to /files/photo.jpg" in second
    assert not glob.glob(str(tmp_path / "netcond-*"))


def caveat(result, check):
    """The `⚠ not exact:` line under a check's line, or None."""
    lines = result.stdout.splitlines()
    for index, text in enumerate(lines):
        if text[:2] in ("✓ ", "✗ ") and text[2:].startswith(check + " — "):
            following = lines[index + 1] if index + 1 < len(lines) else ""
            return following.strip() if following.strip().startswith("⚠ not exact:") else None
    return None


def test_backing_off_from_connections_the_network_refuses():
    # Nothing reaches the origin during the outage: the attempts are the proxy's failed connections.
    # Each refusal reaches the client as a reset (curl exit 56), which --retry-all-errors retries.
    good = scenario("backoff-connection-refused", 'curl -sS --retry 5 --retry-all-errors -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert good.returncode == 0, good.stdout + good.stderr
    assert line(good, "backs-off").startswith("✓") and "refused ×3]" in line(good, "backs-off")
    # The verdict says what the proxy could not show as a network would.
    note = caveat(good, "backs-off")
    assert note and "3 refused connections reached the client as a reset" in note, good.stdout
    assert caveat(good, "completes")

    # On a network curl never retries a refused connection without --retry-connrefused (exit 7);
    # through netcond it does not retry the reset either: one attempt, a failure, as there.
    plain = scenario("backoff-connection-refused", 'curl -sS --retry 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert "never retried" in line(plain, "backs-off") and "exit 56" in line(plain, "completes")

    steady = scenario("backoff-connection-refused", 'curl -sS --retry 30 --retry-delay 1 --retry-all-errors -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert steady.returncode == 1, steady.stdout + steady.stderr
    assert "the gaps do not grow" in line(steady, "backs-off")

    loop = scenario("backoff-connection-refused",
                    'for i in $(seq 300); do curl -fsS -o "$NETCOND_OUTPUT" "$NETCOND_URL" 2>/dev/null && break; done')
    assert loop.returncode == 1, loop.stdout + loop.stderr
    # However fast the machine starts curl: too many attempts in a minute, or gaps that do not grow.
    assert line(loop, "backs-off").startswith("✗")
    assert ("attempts within a minute (cap 20)" in line(loop, "backs-off")
            or "the gaps do not grow" in line(loop, "backs-off"))

    quitter = scenario("backoff-connection-refused", 'wget -q --tries=1 -O "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert quitter.returncode == 1
    assert "1 failed attempt at" in line(quitter, "backs-off") and "never retried" in line(quitter, "backs-off")


PY_GET = """
import os, requests
r = requests.get(os.environ["NETCOND_URL"]{timeout})
open(os.environ["NETCOND_OUTPUT"], "wb").write(r.content)
"""


def test_hang_forever_a_timeout_ends_it_and_no_timeout_hangs():
    good = scenario("hang-forever", 'curl -sS --max-time 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert good.returncode == 0, good.stdout + good.stderr
    assert "saying 'curl: (28) Operation timed out" in line(good, "stays-usable")
    # python requests with a timeout raises, and the traceback says why.
    pygood = scenario("hang-forever", f"python3 -c '{PY_GET.format(timeout=', timeout=5')}'")
    assert pygood.returncode == 0, pygood.stdout + pygood.stderr
    assert "Timeout" in line(pygood, "stays-usable")
    # Without one, it hangs until the deadline.
    bad = scenario("hang-forever", f"python3 -c '{PY_GET.format(timeout='')}'")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "still running at its 25 s deadline (need it to end by itself within 15 s)" in line(bad, "stays-usable")


def test_a_stalled_body_is_noticed_or_not():
    good = scenario("stall-mid-body", 'curl -sS --speed-limit 1024 --speed-time 5 -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Operation too slow" in line(good, "stays-usable")
    wget = scenario("stall-mid-body", 'wget --progress=dot:mega --read-timeout=5 --tries=1 -O "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert wget.returncode == 0, wget.stdout + wget.stderr
    assert "Read error at byte" in line(wget, "stays-usable")
    # The same wget told to be quiet fails with nothing said.
    quiet = scenario("stall-mid-body", 'wget -q --read-timeout=5 --tries=1 -O "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert quiet.returncode == 1
    assert "nothing on stderr" in line(quiet, "stays-usable")
    bad = scenario("stall-mid-body", CURL)
    assert bad.returncode == 1
    assert "still running at its 30 s deadline" in line(bad, "stays-usable")


def test_a_slow_server_needs_a_client_timeout():
    good = scenario("slow-server-45s", 'curl -sS --max-time 30 -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert good.returncode == 0, good.stdout + good.stderr
    ended = float(re.search(r"ended by itself after ([0-9.]+)s", line(good, "stays-usable")).group(1))
    assert 29.5 <= ended < 34
    bad = scenario("slow-server-45s", CURL)
    assert bad.returncode == 1
    assert "that is later than 35 s" in line(bad, "stays-usable")


def test_offline_then_back_through_a_blackhole():
    # Nothing answers and nothing is refused: the attempts are client connections nobody answered.
    good = scenario("offline-then-back", 'curl -sS --retry 5 --max-time 3 -o "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert good.returncode == 0, good.stdout + good.stderr
    assert "no answer ×" in line(good, "backs-off")
    # Attempts the client gave up on never reach the origin later: every failure is a swallowed
    # connection, none a request the origin served after its client had gone.
    assert "cut body" not in line(good, "backs-off") and "[no answer ×" in line(good, "backs-off")
    assert "into a blackhole met a connection netcond accepted at once" in (caveat(good, "backs-off") or "")
    bad = scenario("offline-then-back",
                   'for i in $(seq 60); do curl -fsS --max-time 1 -o "$NETCOND_OUTPUT" "$NETCOND_URL" && break; done')
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "the gaps do not grow" in line(bad, "backs-off")


def test_a_lost_post_response_repeated_with_or_without_a_key():
    post = 'curl -sS --retry 3 --retry-all-errors {key}-H "Content-Type: application/json" -d "{{\\"item\\": 1}}" "$NETCOND_URL"'
    good = scenario("idempotent-post-lost-response", post.format(key='-H "Idempotency-Key: order-42" '))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "(+" in line(good, "idempotent") and "replayed #1, key 'order-42'" in line(good, "idempotent")
    assert line(good, "idempotent").endswith("1 object created")
    bad = scenario("idempotent-post-lost-response", post.format(key=""))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "2 objects created for one intent (the retries carried no Idempotency-Key)" in line(bad, "idempotent")
    # urllib3 retrying POSTs (allowed_methods=None) without a key: the classic double order. The
    # lost response is a connection closed with no response, which urllib3 retries as a read error.
    client = textwrap.dedent("""
        import os, requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry
        s = requests.Session()
        s.mount("http://", HTTPAdapter(max_retries=Retry(total=3, backoff_factor=0.2, allowed_methods=None, status_forcelist=[502])))
        r = s.post(os.environ["NETCOND_URL"], json={"item": 1}, timeout=10)
        r.raise_for_status()
    """)
    python = scenario("idempotent-post-lost-response", f"python3 -c '{client}'")
    assert python.returncode == 1, python.stdout + python.stderr
    assert "2 objects created for one intent" in line(python, "idempotent")


CLIENTS = os.path.join(os.path.dirname(__file__), "clients")
PROBE_THEN_GET = ('until [ "$(curl -s -o /dev/null -w "%{http_code}" http://connectivitycheck.gstatic.com/generate_204)" = 204 ]; '
                  'do sleep 1; done; curl -fsS -o "$NETCOND_OUTPUT" "$NETCOND_URL"')


def check_behind_a_portal_until_login(run_scenario):
    """captive-then-login with a client that probes first (passes) and with curl and wget, which
    save the login page (fail); `run_scenario(name, client)` runs it under an engine."""
    good = run_scenario("captive-then-login", PROBE_THEN_GET)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "opened at +4." in line(good, "captive-safe") and "307,200 bytes identical" in line(good, "captive-safe")
    for client in (CURL, WGET):
        bad = run_scenario("captive-then-login", client)
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert "catalog.json holds the portal's login page, not the data; and it exited 0 as if all was well" in line(bad, "captive-safe")
    return good


def check_a_portal_met_while_resuming(run_scenario):
    """captive-during-resume with a careful resumer (passes), one that splices the page in and wget
    -c (both fail)."""
    resume = os.path.join(CLIENTS, "resume.py")
    good = run_scenario("captive-during-resume", f"python3 {resume} careful")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "1,048,576 bytes identical" in line(good, "captive-safe")
    spliced = run_scenario("captive-during-resume", f"python3 {resume}")
    assert spliced.returncode == 1
    assert "spliced into the data at byte" in line(spliced, "captive-safe")
    # wget -c takes the portal's 200 for "nothing more to get" and exits 0 with 300 KB of 1 MB.
    wget = run_scenario("captive-during-resume", 'wget -c --tries=20 -nv -O "$NETCOND_OUTPUT" "$NETCOND_URL"')
    assert wget.returncode == 1
    assert "exit 0 with wrong data: big.bin: 307,200 of 1,048,576 bytes (short)" in line(wget, "captive-safe")


def test_behind_a_portal_until_login():
    check_behind_a_portal_until_login(scenario)


def test_a_portal_met_while_resuming():
    check_a_portal_met_while_resuming(scenario)


def test_a_page_load_over_edge_reusing_the_connection_or_not():
    # The scenario's own client: one curl for the page and its assets, one connection.
    good = run(["run", os.path.join(SCENARIOS, "edge-page-load.yaml"), "--seed", "3"], timeout=120)
    assert good.returncode == 0, good.stdout + good.stderr
    assert line(good, "stays-usable").startswith("✓ stays-usable — 10 steps (lines matching '^loaded ')")
    # A new curl (a new connection) per asset pays the round trips every time.
    loop = ('curl -fsS -w "%{stderr}loaded %{url_effective}\\n" -o "$NETCOND_OUTPUT" "$NETCOND_URL" && '
            'for u in $ASSETS; do curl -fsS -w "%{stderr}loaded %{url_effective}\\n" -o /dev/null "$u" || exit 1; done')
    bad = scenario("edge-page-load", loop)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "(need all within 18 s)" in line(bad, "stays-usable")


def test_https_origin_with_a_run_ca(tmp_path):
    path = tmp_path / "https.yaml"
    path.write_text(textwrap.dedent("""
        description: a download over HTTPS through the proxy, cut once
        profile: lte
        origin:
          files: {big.bin: {size: 1MB, seed: 15}}
          faults: [{file: big.bin, cut_after: 300KB, first: 1}]
        client: {url: "https://origin.netcond.test/files/big.bin", output: big.bin, deadline: 40s}
        checks:
          completes: {}
          resumes: {}
    """))
    env = {"TMPDIR": str(tmp_path)}
    resume = os.path.join(CLIENTS, "resume.py")
    good = run(["run", str(path), "--seed", "1", "--", "python3", resume, "careful"], timeout=90, env=env)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "1,048,576 bytes identical" in line(good, "completes")
    # The client trusts the run's CA and still the system's: one bundle with both.
    probe = ('test "$SSL_CERT_FILE" = "$CURL_CA_BUNDLE" && test "$SSL_CERT_FILE" = "$REQUESTS_CA_BUNDLE" && '
             'test "$(grep -c "BEGIN CERTIFICATE" "$NETCOND_CA")" = 1 && grep -qF "$(sed -n 2p "$NETCOND_CA")" "$NODE_EXTRA_CA_CERTS" && '
             'grep -qF "$(sed -n 2p "$NETCOND_CA")" "$SSL_CERT_FILE" && '
             'test "$(grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE")" -gt 1 && '
             'curl -fsS -o "$NETCOND_OUTPUT" "$NETCOND_URL" --retry 0; echo "curl exit $?" >&2')
    r = run(["run", str(path), "--seed", "1", "--", "sh", "-c", probe], timeout=90, env=env)
    assert "curl exit 18" in r.stderr, r.stdout + r.stderr
    # Nothing of the CA is left behind.
    assert not glob.glob(str(tmp_path / "netcond-*"))


def check_a_rate_that_falls_mid_download(runner, folder):
    """The same two clients under the moving link: the one whose time-out was fitted to the first
    seconds' rate gives up while the link is slow but moving; the one that times out on no progress
    completes. The JSON report's link samples show the fall (2 Mbit/s and 40 ms, then 200 kbit/s
    and 120 ms from the link's fourth second). Returns the failing run."""
    adaptive = os.path.join(CLIENTS, "adaptive.py")
    bad = runner("rate-falls-mid-download", f"python3 {adaptive} estimate")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    # Given up (exit 1) while the link was slow but moving; when, depends on how late the client
    # started on a loaded machine.
    assert re.match(r"✗ completes — exit 1 after \d", line(bad, "completes")), bad.stdout
    assert "slower than the" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
    report = os.path.join(folder, "falls.json")
    good = runner("rate-falls-mid-download", f"python3 {adaptive} progress", extra=("--json", report))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "2,097,152 bytes identical" in line(good, "completes"), good.stdout
    link = json.load(open(report))["scenarios"][0]["link"]
    assert link[0][1:3] == [2000000, 40], link
    fall = [row for row in link if row[1] == 200000]
    assert fall and 2.5 <= fall[0][0] <= 4.5 and fall[0][2] == 120, link
    back = [row for row in link if row[1] == 2000000 and row[0] > fall[0][0]]
    assert back and 22.5 <= back[0][0] <= 24.5, link
    return bad


def test_a_rate_that_falls_after_the_first_seconds_exposes_a_fitted_time_out(tmp_path):
    check_a_rate_that_falls_mid_download(scenario, str(tmp_path))
    # The same client under a steady link at the first seconds' rate completes: only a link that
    # moves shows the fault.
    text = open(os.path.join(SCENARIOS, "rate-falls-mid-download.yaml")).read()
    steady = re.sub(r"profile:\n(  .*\n)+", "profile:\n  down: {bandwidth: 2mbit, latency: 40ms, queue: 64KB}\n"
                    "  up: {bandwidth: 1mbit, latency: 40ms}\n", text)
    assert "trace:" not in steady
    (tmp_path / "steady.yaml").write_text(steady)
    adaptive = os.path.join(CLIENTS, "adaptive.py")
    fixed = run(["run", str(tmp_path / "steady.yaml"), "--seed", "3", "--", "sh", "-c", f"python3 {adaptive} estimate"],
                timeout=120)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
