"""`netcond trace record` on generated captures (scripts/bench.d/capturegen.py): the recording of
each equals what the whole-capture analysis (before it streamed) recorded, byte for byte; and
--flow / --list-flows choose the connection."""
import hashlib
import os
import subprocess
import sys

import pytest

from conftest import run

GENERATOR = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "bench.d", "capturegen.py")

# (name, capturegen arguments, trace record arguments, sha256 of exit code + output + x.trace + x.yaml
# as netcond recorded them when it kept every packet of every flow and analysed at the end).
RECORDED = [
    ("one", ["--packets", "30000", "--hole-every", "997", "--idle-every", "12000", "--seed", "3"], [],
     "932079c6e2118f11d579948dbc9b6bf97d2d2fdbde311cf3afae444083a1a472"),
    ("raw-window", ["--raw", "--packets", "30000", "--hole-every", "499", "--seed", "4"], ["--from", "1", "--to", "3"],
     "57622bcd4cd9f15757a572b4a24e5441e3f016e5ecf5d5433d88b95daea741cc"),
    ("many", ["--packets", "20000", "--flows", "300", "--hole-every", "3001", "--idle-every", "9000", "--seed", "7"], [],
     "07f51c3c838add07548b1f9ca230f1fb2fd03bbd389920c091ad877f519f44a3"),
    ("many-up", ["--packets", "20000", "--flows", "300", "--seed", "7"], ["--direction", "up"],
     "46d687b3cef45a1d77e04889bf915fe861ee53fcacf815f23b36cf95a67e238b"),
    ("no-handshake", ["--raw", "--no-handshake", "--packets", "20000", "--hole-every", "777", "--seed", "9"], [],
     "7ed4ab64169e4b428b75950827f0792eaa62b95f2fc140fb31dfcb7fd14f265a"),
]


def capture(tmp, generate):
    subprocess.run([sys.executable, GENERATOR, os.path.join(tmp, "c.pcap")] + generate, check=True, capture_output=True)


def recorded(tmp, args):
    """sha256 of what `trace record c.pcap -o x ARGS` printed and wrote (the files removed after)."""
    result = run(["trace", "record", "c.pcap", "-o", "x", "--force"] + args, timeout=120, cwd=tmp)
    digest = hashlib.sha256(f"{result.returncode}\n{result.stdout}{result.stderr}".encode())
    for name in ["x.trace", "x.yaml"]:
        path = os.path.join(tmp, name)
        digest.update(open(path, "rb").read() if os.path.exists(path) else b"-")
        if os.path.exists(path):
            os.remove(path)
    return result, digest.hexdigest()


@pytest.mark.parametrize("name,generate,args,expected", RECORDED, ids=[c[0] for c in RECORDED])
def test_a_streamed_recording_equals_the_whole_capture_analysis(tmp, name, generate, args, expected):
    capture(tmp, generate)
    result, digest = recorded(tmp, args)
    assert digest == expected, result.stdout + result.stderr


def test_flow_chooses_the_connection_and_list_flows_shows_them(tmp):
    capture(tmp, RECORDED[2][1])
    listed = run(["trace", "record", "--list-flows", "c.pcap"], timeout=120, cwd=tmp)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("c.pcap: 301 TCP connections"), lines[0]
    assert lines[1].startswith("  1  10.0.0.2:51234 -> 192.0.2.1:443  down 20001 packets 28.96 MB, up 2502 packets 0 B"), lines[1][:200]
    assert len(lines) == 302, lines[:3]
    assert not os.path.exists(os.path.join(tmp, "c.trace"))
    # The endpoints in either order choose the same connection as the default choice.
    for flow in ["192.0.2.1:443-10.0.0.2:51234", "10.0.0.2:51234-192.0.2.1:443", "1"]:
        result, digest = recorded(tmp, ["--flow", flow])
        assert digest == RECORDED[2][3], result.stdout + result.stderr
    # Another connection, by its number.
    second = lines[2].split()
    result = run(["trace", "record", "c.pcap", "-o", "x", "--flow", "2"], timeout=120, cwd=tmp)
    assert (f"flow:        {second[1]} -> {second[3]}" in result.stdout) or "within one millisecond" in result.stderr \
        or "less than one" in result.stderr, result.stdout + result.stderr


def test_a_flow_that_is_not_there_lists_what_is(tmp):
    capture(tmp, RECORDED[2][1])
    missing = run(["trace", "record", "c.pcap", "-o", "x", "--flow", "10.9.9.9:1-10.0.0.2:51234"], timeout=120, cwd=tmp)
    assert missing.returncode == 2, missing.stderr
    assert "names no connection in the capture; allowed: a number from 1 to 301" in missing.stderr, missing.stderr
    assert "10.0.0.2:51234 -> 192.0.2.1:443" in missing.stderr and "--list-flows" in missing.stderr, missing.stderr
    too_far = run(["trace", "record", "c.pcap", "-o", "x", "--flow", "302"], timeout=120, cwd=tmp)
    assert too_far.returncode == 2 and "names no connection" in too_far.stderr, too_far.stderr
    for bad in ["0", "10.0.0.2:51234", "10.0.0.2-10.0.0.3", "[::1:443-[::2]:1", "300.0.0.1:1-10.0.0.2:2"]:
        result = run(["trace", "record", "c.pcap", "-o", "x", "--flow", bad], timeout=60, cwd=tmp)
        assert result.returncode == 2, (bad, result.stderr)
        assert "is neither a number nor two endpoints; allowed: a number as --list-flows" in result.stderr, (bad, result.stderr)
    up = run(["trace", "record", "c.pcap", "-o", "x", "--flow", "1", "--direction", "up"], timeout=120, cwd=tmp)
    assert up.returncode == 1 and "carried no data up, toward the server" in up.stderr, up.stderr
    assert not os.path.exists(os.path.join(tmp, "x.trace"))
