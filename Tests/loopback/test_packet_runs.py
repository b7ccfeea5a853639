"""Packet-engine runs side by side: many at once, in PID namespaces of their own (where every run has
the same process id) or not.

Needs root, nft and iptables (skipped with the reason without them), and unshare for the namespaces.
Each test checks its own runs' state (their cgroups, chains and rules, found by the run ids they
report): other jobs' netcond runs come and go meanwhile.
"""
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import NETCOND, packet_engine_missing
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
