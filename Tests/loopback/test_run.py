"""`netcond run`, `profiles`, `validate`: exit codes, environment, signals, clear errors."""
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import NETCOND, closed_port, run, wait_until, write_profile


def test_child_exit_code_and_signal_death_are_passed_through():
    assert run(["run", "none", "--", "sh", "-c", "exit 7"]).returncode == 7
    assert run(["run", "none", "--", "sh", "-c", "kill -TERM $$"]).returncode == 128 + signal.SIGTERM


def test_child_gets_proxy_variables_in_both_cases_and_empty_no_proxy():
    result = run(["run", "3g", "--seed", "5", "--", "env"])
    assert result.returncode == 0
    env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    proxy = env["http_proxy"]
    assert proxy.startswith("http://127.0.0.1:")
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "https_proxy", "all_proxy"]:
        assert env[name] == proxy
    assert env["NO_PROXY"] == "" and env["no_proxy"] == ""
    assert env["NETCOND_ORIGIN"] == "http://origin.netcond.test"
    assert env["NETCOND_SEED"] == "5"
    # The summary line names the profile and the seed.
    assert "netcond: 3g:" in result.stderr and "(seed 5)" in result.stderr


def test_seed_comes_from_environment():
    result = run(["run", "none", "--", "sh", "-c", 'echo "$NETCOND_SEED"'], env={"NETCOND_SEED": "77"})
    assert result.stdout.strip() == "77"
    bad = run(["run", "none", "--", "true"], env={"NETCOND_SEED": "seven"})
    assert bad.returncode == 2 and "NETCOND_SEED" in bad.stderr


def test_missing_command_is_127_and_no_command_is_2():
    missing = run(["run", "none", "--", "no-such-program-netcond"])
    assert missing.returncode == 127
    assert "command not found: no-such-program-netcond" in missing.stderr
    nothing = run(["run", "none"])
    assert nothing.returncode == 2
    assert "no command given" in nothing.stderr


def test_unknown_profile_suggests_the_nearest():
    result = run(["run", "edg", "--", "true"])
    assert result.returncode == 2
    assert "did you mean 'edge'" in result.stderr


def start_sleeping_child(tmp, env=None):
    """`netcond run none -- sleep 60` (via sh, which writes its pid first); returns (netcond, child pid)."""
    marker = os.path.join(tmp, "pid")
    process = subprocess.Popen(
        [NETCOND, "run", "none", "--", "sh", "-c", f'echo $$ > {marker}; exec sleep 60'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    deadline = time.time() + 20
    while not os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    return process, int(open(marker).read())


def test_sigterm_to_netcond_reaches_the_child_and_leaves_no_orphan(tmp):
    process, child = start_sleeping_child(tmp)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 128 + signal.SIGTERM
    try:
        os.kill(child, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive


def test_profiles_table_and_show():
    table = run(["profiles"])
    assert table.returncode == 0
    names = [line.split()[0] for line in table.stdout.splitlines()[1:]]
    for name in ["gprs", "edge", "3g", "hspa", "lte", "5g", "dsl", "cable", "wifi", "wifi-lossy",
                 "satellite-geo", "satellite-leo", "very-bad", "offline", "high-latency-dns"]:
        assert name in names
    shown = run(["profiles", "show", "edge"])
    assert shown.returncode == 0
    assert "bandwidth: 240kbit" in shown.stdout and "latency: 400ms" in shown.stdout


def test_validate_reports_file_line_column(tmp):
    good = write_profile(tmp, "good", "extends: 3g\ndown:\n  latency: 1s\n")
    assert run(["validate", good]).returncode == 0
    bad = write_profile(tmp, "bad", "down:\n  latency: 100ms\n  los: 1%\n")
    result = run(["validate", good, bad])
    assert result.returncode == 2
    assert f"{bad}:3:3:" in result.stderr
    assert "did you mean 'loss'" in result.stderr
    loss = write_profile(tmp, "loss", "down:\n  loss: 150%\n")
    result = run(["validate", loss])
    assert result.returncode == 2 and f"{loss}:2:9:" in result.stderr and "100%" in result.stderr
    missing = run(["validate", os.path.join(tmp, "nope.yaml")])
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr


def test_validate_reports_every_error_of_every_file_in_file_order(tmp):
    # Five mistakes in one profile, in different keys and directions, written out of key order.
    profile = write_profile(tmp, "many", "name: many\ndown:\n  loss: 150%\n  latency: 2 parsecs\nup:\n  jiter: 5ms\n"
                                           "tcp: reno\nbogus: 1\n")
    scenario = os.path.join(tmp, "many-scenario.yaml")
    with open(scenario, "w") as f:
        f.write("name: many-scenario\nprofile: edgee\nengine: warp\nclient: {deadline: forever}\nchecks: {completes: {}}\n"
                "colour: blue\n")
    result = run(["validate", profile, scenario])
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("netcond: ") and ".yaml:" in line]
    places = [line.split(": ", 2)[1] for line in lines]
    assert places == [f"{profile}:3:9", f"{profile}:4:12", f"{profile}:6:3", f"{profile}:7:6", f"{profile}:8:1",
                      f"{scenario}:2:10", f"{scenario}:3:9", f"{scenario}:4:20", f"{scenario}:6:1"], result.stderr
    assert "did you mean 'jitter'" in result.stderr and "did you mean 'edge'" in result.stderr
    assert "2 of 2 files are not valid" in result.stderr
    # A cap: a file with 60 unknown keys shows 50, and counts the rest.
    crowded = write_profile(tmp, "crowded", "".join(f"key{i}: 1\n" for i in range(60)))
    result = run(["validate", crowded])
    assert result.returncode == 2
    assert len([line for line in result.stderr.splitlines() if "unknown key" in line]) == 50
    assert "10 more errors not shown (60 in all)" in result.stderr


def test_port_taken_is_a_one_line_error_with_exit_3():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = run(["proxy", "none", "--listen", f"127.0.0.1:{port}"], timeout=20)
    assert result.returncode == 3
    assert "already in use" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_listen_and_forward_are_usage_errors():
    assert run(["proxy", "none", "--listen", "localhost:99999"]).returncode == 2
    result = run(["run", "none", "--forward", "9000", "--", "true"])
    assert result.returncode == 2 and "LISTEN=TARGET" in result.stderr


def test_even_sigkill_of_netcond_leaves_no_orphan(tmp):
    scratch = os.path.join(tmp, "scratch")
    os.mkdir(scratch)
    env = dict(os.environ, TMPDIR=scratch)
    process, child = start_sleeping_child(tmp, env=env)
    process.kill()
    process.wait(timeout=10)
    deadline = time.time() + 5
    alive = True
    while alive and time.time() < deadline:
        try:
            os.kill(child, 0)
            # A zombie reparented to init counts as gone once reaped; give it a moment.
            with open(f"/proc/{child}/stat") as f:
                if f.read().split()[2] == "Z":
                    alive = False
            time.sleep(0.05)
        except (ProcessLookupError, FileNotFoundError):
            alive = False
    assert not alive
    # SIGKILL left the run's HTTPS CA folder (netcond's pid in its name); the next netcond removes
    # what a dead one left.
    assert glob.glob(os.path.join(scratch, f"netcond-{process.pid}-tls-*"))
    assert run(["run", "none", "--", "true"], env={"TMPDIR": scratch}).returncode == 0
    assert not glob.glob(os.path.join(scratch, "netcond-*"))


def test_summary_line_names_losses_and_their_causes(tmp_path):
    clean = run(["run", "lte", "--seed", "3", "--", "curl", "-s", "-o", "/dev/null", "http://origin.netcond.test/bytes/10KB"])
    assert clean.stderr.strip().endswith(
        "1 connection, no segment lost, every TCP sender modelled as cubic (the profile's tcp) (seed 3)"), clean.stderr
    # 20 % loss over ~70 segments: some are lost whatever the segmentation (0.8^70 ≈ 2e-7).
    profile = write_profile(str(tmp_path), "lossy", "tcp: bbr\nlink: {latency: 5ms, loss: 20%}\n")
    lossy = run(["run", profile, "--seed", "3", "--", "curl", "-s", "-o", "/dev/null", "http://origin.netcond.test/bytes/100KB"])
    line = lossy.stderr.strip().splitlines()[-1]
    import re
    # A loaded machine may add a note that netcond itself was held up: allowed, it is a fact.
    assert re.search(r"1 connection, \d+ segments? lost(, \d+ held behind a loss)?"
                     r"(, netcond was held up \d+ times? for over 20 ms \(longest \d+ ms\)[^(]*)?"
                     r", every TCP sender modelled as bbr \(the profile's tcp\) \(seed 3\)$", line), line


def test_low_latency_holds_cpu_dma_latency_while_running_and_releases_it():
    """`--low-latency` keeps /dev/cpu_dma_latency open (PM QoS 0) for the run; as root it is in
    netcond's descriptors while the child runs; without the device or root, the run still works and
    says why the hold is not in effect."""
    script = "ls -l /proc/$PPID/fd | grep -c cpu_dma_latency || true"
    r = run(["run", "none", "--low-latency", "--quiet", "--", "sh", "-c", script], timeout=60)
    assert r.returncode == 0, r.stderr
    if os.geteuid() == 0 and os.path.exists("/dev/cpu_dma_latency"):
        assert r.stdout.strip() == "1", (r.stdout, r.stderr)
        assert "not in effect" not in r.stderr
    else:
        assert r.stdout.strip() == "0"
        assert "--low-latency not in effect" in r.stderr
    plain = run(["run", "none", "--quiet", "--", "sh", "-c", script], timeout=60)
    assert plain.returncode == 0 and plain.stdout.strip() == "0", (plain.stdout, plain.stderr)


CPUIDLE_DRIVER = "/sys/devices/system/cpu/cpuidle/current_driver"


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(CPUIDLE_DRIVER) or not shutil.which("unshare"),
                    reason="needs root, unshare and a kernel with cpuidle to show netcond another driver")
@pytest.mark.parametrize("driver", ["none", "haltpoll"])
def test_low_latency_says_when_the_machine_has_no_cpuidle_driver_for_the_hold_to_steer(tmp_path, driver):
    """/dev/cpu_dma_latency steers the cpuidle driver; a VM booted without one halts its idle CPUs
    whatever the hold says, and netcond says so (with the kernel option that gives one) instead of
    promising polling CPUs. The driver netcond reads is the test's own, bound over sysfs's in a
    mount namespace of this run only."""
    with open(CPUIDLE_DRIVER) as f:
        host_driver = f.read()
    fake = tmp_path / "current_driver"
    fake.write_text(driver + "\n")
    script = (f"mount --bind {fake} {CPUIDLE_DRIVER} && exec {NETCOND} run none --low-latency --quiet "
              "-- sh -c 'ls -l /proc/$PPID/fd | grep -c cpu_dma_latency || true'")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1", (r.stdout, r.stderr)  # held either way: harmless, and a driver may come
    said = "netcond: --low-latency cannot keep idle CPUs polling: this machine has no cpuidle driver"
    if driver == "none":
        assert said in r.stderr and "cpuidle_haltpoll.force=1" in r.stderr, r.stderr
    else:
        assert "cpuidle" not in r.stderr, r.stderr
    with open(CPUIDLE_DRIVER) as f:  # the host's own was never touched
        assert f.read() == host_driver


# --- What a child holds ------------------------------------------------------------------------------

def pids(pattern):
    """Process ids whose command line matches `pattern` (pgrep -f)."""
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in found]


def unique_sleep():
    """A `sleep` argument no other process has: 300 s and a fraction that names this test."""
    return f"300.{os.getpid()}{time.monotonic_ns() % 10**9:09d}"


def kill_all(pattern):
    for pid in pids(pattern):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def descriptors(listing):
    """`ls -l /proc/self/fd` output → {fd: target}."""
    found = {}
    for line in listing.splitlines():
        if " -> " in line:
            left, target = line.split(" -> ", 1)
            found[int(left.split()[-1])] = target
    return found


def only_standard_descriptors(found):
    """0, 1 and 2, plus the directory ls opened to list them (its own, not one it inherited)."""
    extra = {fd: target for fd, target in found.items()
             if fd > 2 and not (target.startswith("/proc/") and target.endswith("/fd"))}
    return set(found) >= {0, 1, 2} and not extra and len(found) <= 4


def test_child_inherits_no_descriptor_of_netcond(tmp_path):
    """The proxy's, origin's, TLS and control listeners, epoll descriptors and pipes stay netcond's:
    a child sees its stdin, stdout and stderr only (both for `run PROFILE` and a scenario's client,
    whose stdout and stderr are the capture pipes and stdin /dev/null)."""
    plain = run(["run", "none", "--quiet", "--", "ls", "-l", "/proc/self/fd"])
    assert plain.returncode == 0, plain.stderr
    found = descriptors(plain.stdout)
    assert only_standard_descriptors(found), plain.stdout
    scenario = tmp_path / "fds.yaml"
    scenario.write_text("name: fds\nprofile: none\nclient: {deadline: 20s}\nchecks: {completes: {}}\n")
    captured = run(["run", str(scenario), "--quiet", "--", "ls", "-l", "/proc/self/fd"])
    assert captured.returncode == 0, captured.stdout + captured.stderr
    found = descriptors(captured.stdout)
    assert only_standard_descriptors(found), captured.stdout
    assert found[0] == "/dev/null" and found[1].startswith("pipe:") and found[2].startswith("pipe:"), found


def test_a_grandchild_that_outlives_netcond_keeps_no_port_open(tmp_path):
    """A background process the child started in a session of its own (out of reach of netcond's
    clean-up) must not keep the dead netcond's proxy and control ports listening: a client is refused
    at once instead of hanging."""
    import socket
    seconds = unique_sleep()
    ports = tmp_path / "ports"
    # The child waits for the grandchild to be in its session (it has become `sleep`), else the end
    # of the child's group could take it first.
    script = (f'echo "$NETCOND_PROXY $NETCOND_CONTROL" > {ports}; '
              f'setsid sleep {seconds} </dev/null >/dev/null 2>&1 & '
              f'until pgrep -f "^sleep {seconds}$" >/dev/null; do sleep 0.05; done')
    try:
        r = run(["run", "none", "--quiet", "--", "sh", "-c", script], timeout=60)
        assert r.returncode == 0, r.stderr
        assert wait_until(lambda: pids(f"^sleep {seconds}$"), seconds=10), "the grandchild never started"
        for url in ports.read_text().split():
            port = int(url.rsplit(":", 1)[1].rstrip("/"))
            with socket.socket() as s:
                s.settimeout(5)
                try:
                    s.connect(("127.0.0.1", port))
                    refused = False
                except ConnectionRefusedError:
                    refused = True
            assert refused, f"{url} still accepts connections after netcond exited"
    finally:
        kill_all(f"^sleep {seconds}$")


# --- The child's process group, signals and terminal ------------------------------------------------

@contextlib.contextmanager
def background_run(command, seconds):
    """`netcond run none --quiet -- COMMAND` in the background; on the way out it is killed if it
    is still running, and so is every `sleep SECONDS` it started."""
    process = subprocess.Popen([NETCOND, "run", "none", "--quiet", "--", *command],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        kill_all(f"^sleep {seconds}$")


def test_sigint_stops_a_shell_and_its_background_job():
    """The child leads a process group: SIGINT reaches the shell's foreground and background
    processes alike, and what ignores it (a non-interactive shell's `&` job) is killed when the
    shell ends. netcond exits 130, as a shell would."""
    seconds = unique_sleep()
    with background_run(["sh", "-c", f"sleep {seconds} & sleep {seconds}"], seconds) as process:
        assert wait_until(lambda: len(pids(f"^sleep {seconds}$")) == 2, seconds=20), "the sleeps never started"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 130
        assert wait_until(lambda: not pids(f"^sleep {seconds}$"), seconds=2), "a sleep is still running"


def test_sigint_stops_bash_waiting_for_its_command():
    """bash waits for its command before acting on SIGINT: the command must get it too."""
    seconds = unique_sleep()
    with background_run(["bash", "-c", f"sleep {seconds}; echo after"], seconds) as process:
        assert wait_until(lambda: pids(f"^sleep {seconds}$"), seconds=20), "the sleep never started"
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=20)
        assert process.returncode == 130 and "after" not in out


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period():
    """SIGTERM is passed on; a group still there 5 s later gets SIGKILL, and netcond exits with the
    child's status (137)."""
    seconds = unique_sleep()
    with background_run(["sh", "-c", f"trap '' TERM; sleep {seconds}"], seconds) as process:
        assert wait_until(lambda: pids(f"^sleep {seconds}$"), seconds=20), "the sleep never started"
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        waited = time.monotonic() - sent
        assert process.returncode == 128 + signal.SIGKILL, err
        assert 4.5 <= waited <= 15, waited
        assert "netcond: sh still running 5 s after SIGTERM: killed (SIGKILL to its process group)" in err
        assert wait_until(lambda: not pids(f"^sleep {seconds}$"), seconds=2), "the sleep is still running"


def test_what_the_child_leaves_running_ends_with_it():
    """A shell that exits leaving a background job: the job ends too, and the exit code is the shell's."""
    seconds = unique_sleep()
    try:
        r = run(["run", "none", "--quiet", "--", "sh", "-c", f"sleep {seconds} & exit 3"], timeout=30)
        assert r.returncode == 3, r.stderr
        assert wait_until(lambda: not pids(f"^sleep {seconds}$"), seconds=2), "the background sleep is still running"
    finally:
        kill_all(f"^sleep {seconds}$")


class Terminal:
    """A program on a pseudo-terminal of its own (its controlling terminal), as in a terminal window."""

    def __init__(self, argv, env=None):
        import pty
        full_env = dict(os.environ, PS1="$ ", TERM="dumb")
        full_env.pop("NETCOND_SEED", None)
        full_env.update(env or {})
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.execvpe(argv[0], argv, full_env)
            finally:
                os._exit(127)
        self.output = b""

    def send(self, text):
        os.write(self.fd, text.encode() if isinstance(text, str) else text)

    def expect(self, text, seconds=20):
        """Reads until `text` has appeared (after what earlier expects consumed); the output so far."""
        import select
        deadline = time.monotonic() + seconds
        while text.encode() not in self.output:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never came; output: {self.output.decode(errors='replace')!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                assert chunk, f"{text!r} never came before the end; output: {self.output.decode(errors='replace')!r}"
                self.output += chunk
        found = self.output.index(text.encode()) + len(text)
        seen, self.output = self.output[:found], self.output[found:]
        return seen.decode(errors="replace")

    def close(self):
        for sig in (signal.SIGHUP, signal.SIGKILL):
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        os.close(self.fd)


def test_on_a_terminal_the_child_is_in_the_foreground_and_netcond_takes_the_terminal_back():
    """The child's group is given the terminal (it can read it), and netcond takes the terminal back
    for its caller when the child ends. Here netcond's group is orphaned (its parent, the session
    leader, is in the same group): ^Z cannot stop netcond, and the child goes on as the kernel would
    have let it."""
    script = (f"{NETCOND} run none --quiet -- sh -c 'echo ready; read line; echo got-$line'; echo rc=$?; "
              "awk '{print \"pg=\" $5 \" fg=\" $8 \".\"}' /proc/self/stat")
    terminal = Terminal(["sh", "-c", script])
    try:
        terminal.expect("ready")
        time.sleep(0.3)
        terminal.send("\x1a")
        time.sleep(0.3)
        terminal.send("hello\n")
        terminal.expect("got-hello")
        terminal.expect("rc=0")
        terminal.expect("pg=")
        pg, fg = terminal.expect(".").rstrip(".").split(" fg=")
        assert pg == fg, (pg, fg)
    finally:
        terminal.close()


def test_on_a_terminal_ctrl_c_reaches_the_child_group():
    """^C goes to the child's group (it has the terminal): the shell and both sleeps end, 130."""
    seconds = unique_sleep()
    terminal = Terminal(["bash", "--norc", "--noprofile", "--noediting", "-i"])
    try:
        terminal.expect("$ ")
        terminal.send(f"{NETCOND} run none --quiet -- sh -c 'sleep {seconds} & sleep {seconds}'\n")
        assert wait_until(lambda: len(pids(f"^sleep {seconds}$")) == 2, seconds=20), "the sleeps never started"
        terminal.send("\x03")
        terminal.expect("$ ")
        terminal.send("echo rc=$?\n")
        terminal.expect("rc=130")
        assert wait_until(lambda: not pids(f"^sleep {seconds}$"), seconds=2), "a sleep is still running"
    finally:
        terminal.close()
        kill_all(f"^sleep {seconds}$")


def test_on_a_terminal_ctrl_z_stops_netcond_with_its_child_and_fg_resumes_both():
    """Job control still works: ^Z stops the child, then netcond (the shell says Stopped); `fg`
    gives the child the terminal again and continues it."""
    marker = unique_sleep()
    terminal = Terminal(["bash", "--norc", "--noprofile", "--noediting", "-i"])
    try:
        terminal.expect("$ ")
        terminal.send(f"{NETCOND} run none --quiet -- sh -c 'echo ready; read line; echo got-$line; : {marker}'\n")
        terminal.expect("ready")
        time.sleep(0.3)
        terminal.send("\x1a")
        terminal.expect("Stopped")
        terminal.expect("$ ")
        continue_in_foreground(terminal)
    finally:
        terminal.close()
        kill_all(marker)


def continue_in_foreground(terminal):
    """`fg` a stopped job that reads a line and echoes `got-LINE`: it gets the terminal, reads,
    and the job ends with status 0."""
    terminal.send("fg\n")
    time.sleep(0.5)
    terminal.send("hello\n")
    terminal.expect("got-hello")
    terminal.expect("$ ")
    terminal.send("echo rc=$?\n")
    terminal.expect("rc=0")


def test_on_a_terminal_a_background_run_that_reads_the_terminal_stops_until_fg():
    """Started with `&`, the child is not given the terminal; when it reads it, it stops, netcond
    stops with it (the shell lists the job as stopped), and `fg` gives it the terminal and continues it."""
    marker = unique_sleep()
    terminal = Terminal(["bash", "--norc", "--noprofile", "--noediting", "-i"])
    try:
        terminal.expect("$ ")
        terminal.send(f"{NETCOND} run none --quiet -- sh -c 'read line; echo got-$line; : {marker}' &\n")
        terminal.expect("$ ")
        deadline = time.monotonic() + 20
        while True:
            terminal.send("jobs\n")
            listed = terminal.expect("$ ")
            if "Stopped" in listed:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
        continue_in_foreground(terminal)
    finally:
        terminal.close()
        kill_all(marker)


# --- Text from files on the terminal ---------------------------------------------------------------

def test_names_with_control_characters_are_refused_and_other_text_is_escaped(tmp_path):
    """A scenario or profile file cannot drive the terminal: a name with a control character is a
    file:line:column error saying what is allowed; a description is printed with them escaped."""
    scenario = tmp_path / "hostile.yaml"
    scenario.write_text('name: "clear\\e[2J\\e[H"\nprofile: none\nchecks: {completes: {}}\n')
    refused = [run(["validate", str(scenario)])]
    assert refused[0].returncode == 2, refused[0].stdout + refused[0].stderr
    assert f'{scenario}:1:7: name: the scenario name "clear\\u001B[2J\\u001B[H" has a control character (U+001B) ' \
           "at character 6; allowed: printable characters" in refused[0].stderr
    profile = tmp_path / "hostile-profile.yaml"
    profile.write_text('name: "edge\\a"\ndown: {latency: 10ms}\n')
    refused.append(run(["validate", str(profile)]))
    assert refused[1].returncode == 2 and f"{profile}:1:7: name: the profile name" in refused[1].stderr, refused[1].stderr
    fault = tmp_path / "hostile-fault.yaml"
    fault.write_text('faults:\n  - {name: "x\\x7F", status: 503}\n')
    refused.append(run(["validate", str(fault)]))
    assert refused[2].returncode == 2 and f"{fault}:2:12: faults[0].name: the fault name" in refused[2].stderr, refused[2].stderr
    for result in refused:
        assert not any(c in result.stdout + result.stderr for c in "\x1b\x07\x7f"), result.stderr

    folder = tmp_path / "suite"
    folder.mkdir()
    described = folder / "described.yaml"
    described.write_text('name: described\ndescription: "title\\e]0;pwned\\a and more"\nprofile: none\n'
                         'client: {deadline: 20s}\nchecks: {completes: {}}\n')
    shown = run(["test", str(folder), "--", "true"], timeout=60)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "title\\u001B]0;pwned\\u0007 and more" in shown.stdout
    single = run(["run", str(described), "--", "true"], timeout=60)
    assert single.returncode == 0, single.stdout + single.stderr
    for output in [shown.stdout, shown.stderr, single.stdout, single.stderr]:
        assert "\x1b" not in output and "\x07" not in output, output


def test_bash_completion_offers_built_in_profiles_and_profile_files(tmp_path):
    """The script argument-parser generates, sourced by a real bash, completes a profile argument with
    the built-in names and the YAML files (and folders) of the directory being typed."""
    script = run(["--generate-completion-script", "bash"])
    assert script.returncode == 0, script.stderr
    (tmp_path / "completion.bash").write_text(script.stdout)
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "tunnel.yaml").write_text("link: {latency: 1ms}\n")
    (tmp_path / "links" / "notes.txt").write_text("not a profile\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(os.path.abspath(NETCOND), bindir / "netcond")

    def complete(*words):
        line = " ".join(("netcond",) + words)
        probe = (f"source {tmp_path}/completion.bash; COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; "
                 f"COMP_WORDS=(netcond {' '.join(repr(w) for w in words)}); COMP_CWORD={len(words)}; _netcond; "
                 "printf '%s\\n' \"${COMPREPLY[@]}\"")
        r = subprocess.run(["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                           env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"})
        return set(r.stdout.split())

    assert complete("run", "sat") == {"satellite-geo", "satellite-leo"}
    assert complete("proxy", "links/") == {"links/tunnel.yaml"}
    assert {"edge", "links"} <= complete("ctl", "profile", "")


def test_completion_never_crashes_whatever_the_word(tmp_path):
    """Completion of any word a shell may pass (one letter, empty, ~, /, a folder holding a name that
    is not UTF-8) answers a list and exits 0: one letter trapped in deletingLastPathComponent and
    printed a backtrace into the terminal."""
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "fast.yaml").write_text("link: {latency: 1ms}\n")
    os.close(os.open(os.path.join(os.fsencode(tmp_path / "lab"), b"\xff\xfe.yaml"), os.O_CREAT | os.O_WRONLY, 0o644))

    def complete(word):
        r = subprocess.run([NETCOND, "---completion", "run", "--", "positional@0", "2", str(len(word)), "netcond", "run", word],
                           cwd=tmp_path, capture_output=True, timeout=30, env={**os.environ, "HOME": str(tmp_path)})
        assert r.returncode == 0, (word, r.returncode, r.stderr[-2000:])
        assert b"Fatal error" not in r.stderr and b"backtrace" not in r.stderr.lower(), (word, r.stderr[-2000:])
        return set(r.stdout.decode("utf-8", "replace").split())

    assert complete("e") == {"edge"}
    assert "gprs" in complete("") and "lab" in complete("")
    assert complete("~") == set()
    assert "~/lab" in complete("~/")
    assert "/etc" in complete("/")
    assert "lab/fast.yaml" in complete("lab/")
    assert len(complete("lab/")) == 2  # the name that is not UTF-8 is listed, not a crash


def test_version_names_the_git_revision_it_was_built_from():
    r = run(["--version"])
    assert r.returncode == 0, r.stderr
    top = os.path.join(os.path.dirname(__file__), "..", "..")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=top, capture_output=True, text=True)
    if head.returncode != 0:  # a source archive: no revision to know
        assert r.stdout.strip().endswith("(git unknown)"), r.stdout
        return
    # Built from this checkout's HEAD (scripts/test builds before it tests).
    assert r.stdout.strip() == f"0.1.0 (git {head.stdout.strip()[:12]})", r.stdout


def test_the_summary_names_the_profile_file_and_a_run_with_no_connection_says_why(tmp):
    """A copied profile still calls itself edge: the summary names the file that ran. A command that
    made no connection through netcond (it ignores the proxy, or made none) is told why that may be
    and what takes any program's packets through the link; one that did is not. `profiles` lists
    every name `run` accepts, none included."""
    mine = os.path.join(tmp, "mine.yaml")
    shutil.copy(os.path.join(os.path.dirname(__file__), "..", "..", "Profiles", "edge.yaml"), mine)
    silent = run(["run", mine, "--seed", "1", "--", "true"])
    assert silent.returncode == 0, silent.stderr
    assert f"netcond: edge ({mine}): " in silent.stderr, silent.stderr
    assert "no connection went through netcond" in silent.stderr and "--engine packet" in silent.stderr
    used = run(["run", "none", "--seed", "1", "--", "curl", "-sS", "-o", "/dev/null", "http://origin.netcond.test/bytes/10"])
    assert used.returncode == 0 and "netcond: none: " in used.stderr, used.stderr
    assert "no connection went through netcond" not in used.stderr
    quiet = run(["run", "edge", "--quiet", "--", "true"])
    assert quiet.stderr == "", quiet.stderr
    names = [line.split()[0] for line in run(["profiles"]).stdout.splitlines()[1:]]
    assert "none" in names and "edge" in names and len(names) == len(set(names)), names


def test_options_may_come_before_the_subcommand():
    """`netcond ctl --control URL status` is `netcond ctl status --control URL`; `netcond --seed 7
    run edge` is `netcond run --seed 7 edge`; what follows `--` is the command's, untouched."""
    port = closed_port()
    before = run(["ctl", "--control", f"http://127.0.0.1:{port}", "--json", "status"])
    after = run(["ctl", "status", "--control", f"http://127.0.0.1:{port}", "--json"])
    assert before.returncode == after.returncode == 3, before.stderr
    assert before.stderr == after.stderr and f"no control API at http://127.0.0.1:{port}" in before.stderr
    seeded = run(["--seed", "7", "run", "edge", "--", "sh", "-c", "echo --seed $0", "x"])
    assert seeded.returncode == 0 and "(seed 7)" in seeded.stderr, seeded.stderr
    assert seeded.stdout == "--seed x\n"
    unknown = run(["ctl", "--control", f"http://127.0.0.1:{port}", "nonsense"])
    assert unknown.returncode == 2, unknown.stderr


def test_validate_reads_every_file_and_says_each_ones_problem_in_order(tmp):
    bad1 = write_profile(tmp, "bad1", "name: x\ndown:\n  latency: 5parsecs\n")
    bad2 = write_profile(tmp, "bad2", "name: y\nup:\n  bandwidth: fast\n")
    good = os.path.join(os.path.dirname(__file__), "..", "..", "Profiles", "edge.yaml")
    result = run(["validate", bad1, good, bad2])
    assert result.returncode == 2
    assert result.stdout == f"ok: {good} (profile edge)\n"
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"netcond: {bad1}:3:12: down.latency: unknown unit 'parsecs'"), lines
    assert lines[1].startswith(f"netcond: {bad2}:3:14: up.bandwidth: 'fast' does not start with a number"), lines
    assert lines[2] == "netcond: 2 of 3 files are not valid", lines


def test_scripts_install_puts_netcond_on_the_path_and_uninstall_takes_it_away(tmp):
    """scripts/install (here with a build already made, --binary): one file in PREFIX/bin, and the
    README's commands run as written with it on the PATH; --uninstall removes it."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "install")
    prefix = os.path.join(tmp, "prefix")
    done = subprocess.run([script, "--prefix", prefix, "--binary", NETCOND], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert os.listdir(os.path.join(prefix, "bin")) == ["netcond"]
    env = dict(os.environ, PATH=os.path.join(prefix, "bin") + os.pathsep + os.environ["PATH"])
    env.pop("NETCOND_SEED", None)
    out = os.path.join(tmp, "x")
    readme = subprocess.run(["sh", "-c", f"netcond run edge -- curl -so {out} http://origin.netcond.test/bytes/20KB"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert readme.returncode == 0 and os.path.getsize(out) == 20 * 1024, readme.stderr
    assert subprocess.run(["netcond", "--version"], capture_output=True, text=True, env=env).stdout.startswith("0.1.0")
    gone = subprocess.run([script, "--uninstall", "--prefix", prefix], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 0 and not os.path.exists(os.path.join(prefix, "bin", "netcond")), gone.stderr
    bad = subprocess.run([script, "--nonsense"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "allowed: --prefix DIR" in bad.stderr


@pytest.mark.parametrize("command", [[], ["run"], ["test"], ["proxy"], ["ctl"], ["profiles"], ["validate"], ["demo"],
                                     ["fetch"], ["report"], ["report", "merge"], ["toxiproxy"], ["trace", "record"]])
def test_help_reads_well_at_80_columns(command):
    """Examples and tables in a command's help (indented lines) fit 80 columns: a terminal would
    otherwise wrap them at the left edge, where they no longer line up."""
    text = subprocess.run([NETCOND, *command, "--help"], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, COLUMNS="300")).stdout
    discussion = text.split("\nUSAGE:")[0]
    long = [line for line in discussion.splitlines() if line.startswith("  ") and len(line) > 80]
    assert not long, long
