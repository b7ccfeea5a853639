"""Packet-engine runs side by side: many at once (in PID namespaces of their own, where every run has
the same process id, or not), what a run leaves in the firewall's shared tables after it, and what
a run under `--user` needs of TMPDIR.

Needs root, nft and iptables (skipped with the reason without them), and unshare for the namespaces.
Each test checks its own runs' state (their cgroups, chains and rules, found by the run ids they
report), or a network namespace it made itself: other jobs' netcond runs come and go meanwhile.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import NETCOND, packet_engine_missing, run
from packet_state import CGROUP_ROOT, leftovers_of

pytestmark = pytest.mark.skipif(packet_engine_missing() is not None, reason=packet_engine_missing() or "")

RUNS = 10
# Each command says which cage it is in, waits (at most 150 s) until all the runs' commands have
# started, so that the ten cages are live at once, then fetches from the built-in origin.
COMMAND = r"""
grep -o 'netcond-[0-9a-z]*' /proc/self/cgroup | head -n 1
touch "$0/started-$1"
i=0
while [ "$(ls "$0" | grep -c '^started-')" -lt "$2" ] && [ "$i" -lt 1500 ]; do sleep 0.1; i=$((i + 1)); done
[ "$i" -lt 1500 ] || { echo "not all $2 runs started" >&2; exit 9; }
curl -sS -o /dev/null -w '%{http_code}\n' http://origin.netcond.test/bytes/2000
"""


@pytest.mark.parametrize("namespaced", [True, False], ids=["each-in-its-own-pid-namespace", "plain"])
def test_ten_packet_runs_at_once_all_succeed_and_leave_nothing(tmp, namespaced):
    """Ten `netcond run --engine packet` at once. Under `unshare --pid --fork` each netcond is
    process 1 of its namespace: runs named after their process id took one another for the same
    run, and the refused ones killed the live one's processes and removed its cgroup (0 of 10
    passed). Every run has a cage of its own, its command's fetch passes, and none of their
    cgroups, chains or rules is left after."""
    if namespaced and not shutil.which("unshare"):
        pytest.skip("no unshare (util-linux)")
    barrier = os.path.join(tmp, "barrier")
    os.mkdir(barrier)
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"] if namespaced else []
    processes = []
    try:
        for index in range(RUNS):
            processes.append(subprocess.Popen(
                prefix + [NETCOND, "run", "--engine", "packet", "--quiet", "none", "--",
                          "sh", "-c", COMMAND, barrier, str(index), str(RUNS)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results = []
        deadline = time.monotonic() + 240
        for process in processes:
            out, err = process.communicate(timeout=max(1, deadline - time.monotonic()))
            results.append((process.returncode, out, err))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    failed = [(code, err.strip()[-400:]) for code, out, err in results if code != 0 or not out.endswith("200\n")]
    assert not failed, f"{len(failed)} of {RUNS} runs failed: {failed}"
    cages = [out.split()[0] for code, out, err in results]
    assert all(re.fullmatch(r"netcond-[0-9a-z]+", cage) for cage in cages), cages
    assert len(set(cages)) == RUNS, f"runs shared a cage: {cages}"
    for cage in cages:
        assert not os.path.exists(os.path.join(CGROUP_ROOT, cage))
        assert leftovers_of(cage[len("netcond-"):]) == []


def _in_a_network_namespace(script, timeout=120):
    """Runs `script` (sh) in a network namespace of its own, with its loopback up: its nft tables are
    this test's alone. The namespace goes when the script ends."""
    return subprocess.run(["unshare", "--net", "sh", "-c", "ip link set lo up || exit 90\n" + script, NETCOND],
                          capture_output=True, text=True, timeout=timeout)


MANGLE_TABLES = r"""
echo "before: $(nft list tables | tr '\n' ' ')"
"$0" run --engine packet --quiet none -- curl -sS -o /dev/null -w '%{http_code}\n' http://origin.netcond.test/bytes/100
echo "exit: $?"
echo "after: $(nft list tables | tr '\n' ' ')"
"""


@pytest.mark.skipif(not shutil.which("unshare") or not shutil.which("ip"), reason="needs unshare and ip")
def test_the_last_run_out_removes_the_mangle_tables_iptables_made_for_it_and_nothing_else(tmp):
    """iptables-nft makes the `ip mangle` and `ip6 mangle` tables for the run's NFQUEUE rules and
    leaves them, empty, when the rules go: the last run out removes them when they were not there
    before the runs and nothing else is in them. Tables that were there before (empty, or with
    another program's rules) stay as they were. In a network namespace of the test's own, where no
    other job's run is."""
    fresh = _in_a_network_namespace(MANGLE_TABLES)
    assert fresh.returncode == 0 and "exit: 0" in fresh.stdout, fresh.stdout + fresh.stderr
    before, after = (re.search(rf"{when}: (.*)", fresh.stdout).group(1) for when in ("before", "after"))
    assert "mangle" not in before, fresh.stdout
    assert "200" in fresh.stdout and "mangle" not in after and "netcond" not in after, fresh.stdout

    # Another program's rule in ip mangle, and an empty ip6 mangle some other program made: kept.
    other = _in_a_network_namespace(
        "iptables -t mangle -A PREROUTING -s 192.0.2.1 -m comment --comment other-program -j ACCEPT || exit 91\n"
        "nft add table ip6 mangle || exit 92\n" + MANGLE_TABLES
        + "iptables -t mangle -S PREROUTING; nft list table ip6 mangle\n")
    assert other.returncode == 0 and "exit: 0" in other.stdout, other.stdout + other.stderr
    after = re.search(r"after: (.*)", other.stdout).group(1)
    assert "table ip mangle" in after and "table ip6 mangle" in after and "netcond" not in after, other.stdout
    assert "-A PREROUTING -s 192.0.2.1/32 -m comment --comment other-program -j ACCEPT" in other.stdout, other.stdout


SCENARIO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Scenarios", "resume-after-dropout.yaml")


def test_under_user_a_tmpdir_the_user_cannot_enter_is_refused_before_the_run_naming_it():
    """The run's files the command reads (the origin's CA bundle, a scenario's working folder) are
    made in TMPDIR. One inside a 0700 folder of root's left `--user nobody` unable to reach them:
    curl exited 77, a scenario's client 126, and netcond said nothing. The run is refused before
    anything starts (exit 2), naming the folder, TMPDIR and what to do; one the user can pass
    through to works."""
    # pytest's own folder is closed to others already: a folder of this test's, open up to `closed`.
    base = tempfile.mkdtemp(prefix="user-tmpdir-test-", dir="/tmp")
    try:
        os.chmod(base, 0o711)
        closed = os.path.join(base, "closed")
        os.mkdir(closed)
        os.chmod(closed, 0o700)
        inner = os.path.join(closed, "tmp")
        os.mkdir(inner)
        os.chmod(inner, 0o1777)
        _refused_for_tmpdir(closed, inner)
        # A TMPDIR the user can pass through to (0711 on the way): the run goes on, its CA trusted.
        opened = os.path.join(base, "open")
        os.mkdir(opened)
        os.chmod(opened, 0o1777)
        result = run(["run", "--engine", "packet", "--user", "nobody", "--quiet", "none", "--", "curl", "-sS", "-o", "/dev/null",
                      "-w", "%{http_code}", "https://origin.netcond.test/bytes/10"], env={"TMPDIR": opened}, timeout=120)
        assert result.returncode == 0 and result.stdout == "200", result.stdout + result.stderr
    finally:
        shutil.rmtree(base)


def _refused_for_tmpdir(closed, inner):
    env = {"TMPDIR": inner}
    for args in (["run", "--engine", "packet", "--user", "nobody", "none", "--",
                  "curl", "-sS", "-o", "/dev/null", "-w", "ran %{http_code}", "https://origin.netcond.test/bytes/10"],
                 ["run", "--engine", "packet", "--user", "nobody", SCENARIO, "--", "sh", "-c", "echo ran"],
                 ["test", "--engine", "packet", "--user", "nobody", SCENARIO, "--", "sh", "-c", "echo ran"]):
        result = run(args, env=env, timeout=120)
        assert result.returncode == 2 and "ran" not in result.stdout, (args, result.stdout, result.stderr)
        assert f"user nobody cannot enter {closed} (mode 700, owned by root), on the way to TMPDIR ({inner})" \
            in result.stderr, result.stderr
        assert "set TMPDIR to a folder that user can enter" in result.stderr, result.stderr
    assert os.listdir(inner) == [], "nothing of a run was made"
