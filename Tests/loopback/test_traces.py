"""Trace-driven links (mahimahi's format) as a user meets them: a profile on disk names a trace file
beside it, and a real client downloads through it under both engines."""
import os
import re
import time

import pytest

from conftest import packet_engine_missing, run, write_profile


def trace_profile(tmp, trace_lines, name="cell"):
    """A profile whose down direction is a trace (in traces/, relative to the profile), 10 ms each way."""
    os.makedirs(os.path.join(tmp, "traces"), exist_ok=True)
    with open(os.path.join(tmp, "traces", name + ".trace"), "w") as f:
        f.write("".join(f"{line}\n" for line in trace_lines))
    return write_profile(tmp, name, f"""
name: {name}
description: a measured down link (trace), 10 ms each way
down:
  trace: traces/{name}.trace
  latency: 10ms
up:
  latency: 10ms
""")


@pytest.mark.parametrize("engine", ["proxy", "packet"])
def test_a_download_takes_as_long_as_the_traces_opportunities_allow(tmp, engine):
    if engine == "packet" and packet_engine_missing():
        pytest.skip(packet_engine_missing())
    # One 1,500-byte opportunity every 10 ms: 1.2 Mbit/s. 300 KB of body (plus headers) needs at
    # least 200 opportunities, so at least 2.0 s on any machine; a link that ignored the trace
    # would take milliseconds.
    profile = trace_profile(tmp, [10])
    result = run(["run", "--engine", engine, "--seed", "3", profile, "--",
                  "curl", "-sS", "-o", "/dev/null", "-w", "%{time_total} %{size_download}",
                  "http://origin.netcond.test/bytes/300000"], timeout=120)
    assert result.returncode == 0, result.stderr
    seconds, size = result.stdout.split()
    assert int(size) == 300000
    assert 2.0 <= float(seconds) < 12.0, result.stdout


def test_a_bad_trace_file_says_where_and_nothing_runs(tmp):
    profile = trace_profile(tmp, [1, 5, 3], name="unsorted")
    marker = os.path.join(tmp, "ran")
    result = run(["run", profile, "--", "touch", marker], timeout=60)
    assert result.returncode == 2, result.stderr
    assert "unsorted.trace:3" in result.stderr, result.stderr
    assert "sort -n" in result.stderr, result.stderr
    assert not os.path.exists(marker)


def test_a_profile_naming_a_missing_trace_says_so(tmp):
    profile = write_profile(tmp, "missing", "down:\n  trace: traces/none.trace\n")
    result = run(["run", profile, "--", "true"], timeout=60)
    assert result.returncode == 2, result.stderr
    assert "missing.yaml:2" in result.stderr and "no trace file 'traces/none.trace'" in result.stderr, result.stderr


@pytest.mark.parametrize("engine", ["proxy", "packet"])
def test_a_step_series_holds_a_download_to_each_moments_rate(tmp, engine):
    if engine == "packet" and packet_engine_missing():
        pytest.skip(packet_engine_missing())
    # The first 5 s of the run carry 120 kbit/s (75 KB at most), then 50 Mbit/s: 150 KB cannot
    # have arrived before the run's fifth second, whenever the client starts; afterwards it is quick.
    with open(os.path.join(tmp, "train.csv"), "w") as f:
        f.write("t, rate, delay, loss\n0, 120kbit, 10ms, 0%\n5, 50mbit, 10ms, 0%\n")
    profile = write_profile(tmp, "train", "name: train\ndown:\n  trace: train.csv\nup:\n  latency: 10ms\n")
    started = time.monotonic()
    result = run(["run", "--engine", engine, "--seed", "3", profile, "--",
                  "curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}",
                  "http://origin.netcond.test/bytes/150000"], timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout == "150000"
    assert 5.0 <= elapsed < 30.0, (elapsed, result.stderr)


@pytest.mark.parametrize("engine", ["proxy", "packet"])
def test_a_download_completes_under_a_shipped_measured_cellular_link(engine):
    if engine == "packet" and packet_engine_missing():
        pytest.skip(packet_engine_missing())
    profile = os.path.join(os.path.dirname(__file__), "..", "..", "Profiles", "measured", "akamai-loss-median.yaml")
    result = run(["run", "--engine", engine, "--seed", "3", profile, "--",
                  "curl", "-sS", "--retry", "3", "-o", "/dev/null", "-w", "%{size_download}",
                  "http://origin.netcond.test/bytes/300000"], timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "300000"
    assert "netcond: akamai-loss-median" in result.stderr, result.stderr


@pytest.mark.parametrize("engine", ["proxy", "packet"])
def test_a_download_completes_under_the_synthesised_starlink_link(engine):
    if engine == "packet" and packet_engine_missing():
        pytest.skip(packet_engine_missing())
    # 2 MB across Starlink's first slot (a round trip of at least 2 x 16 ms in the shipped series):
    # the transfer completes, byte for byte, and no reply came sooner than one round trip.
    profile = os.path.join(os.path.dirname(__file__), "..", "..", "Profiles", "measured", "starlink.yaml")
    result = run(["run", "--engine", engine, "--seed", "3", profile, "--",
                  "curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_starttransfer}",
                  "http://origin.netcond.test/bytes/2000000"], timeout=180)
    assert result.returncode == 0, result.stderr
    size, first_byte = result.stdout.split()
    assert size == "2000000"
    assert float(first_byte) >= 0.032, result.stdout
    assert "netcond: starlink" in result.stderr, result.stderr


def test_trace_record_turns_a_capture_of_a_download_into_the_link_it_crossed(tmp):
    if packet_engine_missing():
        pytest.skip(packet_engine_missing())
    # A known link: one 1,500-byte opportunity every 2 ms (6 Mbit/s), 10 ms each way. A capture of
    # a 3 MB download through it, recorded, gives back 500 opportunities a second once the download
    # fills the link, and the delays of the handshake.
    profile = trace_profile(tmp, [2], name="known")
    capture = os.path.join(tmp, "known.pcap")
    result = run(["run", "--engine", "packet", "--seed", "3", "--pcap", capture, profile, "--",
                  "curl", "-sS", "-o", "/dev/null", "http://origin.netcond.test/bytes/3000000"], timeout=120)
    assert result.returncode == 0, result.stderr
    prefix = os.path.join(tmp, "recorded")
    recorded = run(["trace", "record", capture, "-o", prefix], timeout=60)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "recorded down, toward the client" in recorded.stdout, recorded.stdout
    lines = [int(v) for v in open(prefix + ".trace").read().split()]
    per_second = {}
    for ms in lines[:-1]:
        per_second[ms // 1000] = per_second.get(ms // 1000, 0) + 1
    whole = sorted(per_second[k] for k in per_second if k < lines[-1] // 1000)
    assert len(whole) >= 3, (whole, recorded.stdout)
    assert abs(whole[len(whole) // 2] - 500) <= 10, (whole, recorded.stdout)
    profile_text = open(prefix + ".yaml").read()
    assert "trace: recorded.trace" in profile_text or "trace: \"recorded.trace\"" in profile_text, profile_text
    assert "mid-link" in recorded.stdout, recorded.stdout  # netcond's capture stamps packets as they leave the link
    down = float(re.search(r"down ([\d.]+)ms", recorded.stdout).group(1))
    assert 9.5 <= down <= 15, recorded.stdout
    # The recorded link runs like any other, and the files are not overwritten without --force.
    again = run(["run", "--seed", "3", prefix + ".yaml", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}",
                 "http://origin.netcond.test/bytes/200000"], timeout=120)
    assert again.returncode == 0 and again.stdout == "200000", again.stderr
    refused = run(["trace", "record", capture, "-o", prefix], timeout=60)
    assert refused.returncode == 2 and "exists" in refused.stderr, refused.stderr


def test_trace_record_says_what_is_wrong_with_a_capture(tmp):
    text = os.path.join(tmp, "notes.pcap")
    with open(text, "w") as f:
        f.write("these are not packets\n")
    result = run(["trace", "record", text, "-o", os.path.join(tmp, "x")], timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "notes.pcap" in result.stderr and "pcap" in result.stderr, result.stderr
    assert not os.path.exists(os.path.join(tmp, "x.trace"))
