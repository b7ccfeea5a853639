"""Every shell command of Docs/*.md (and of the pages in Profiles/, Scenarios/, Examples/) runs
as written (doc_commands.py says how): each with its exit code and what its output must say below,
in page order, a page's commands in one session (a folder of stand-ins, a network namespace of its
own as root, the servers a page starts). A block that cannot run here carries a marker:
`<!-- run by: Tests/…py::test_name -->`, checked to name a test that exists, or
`<!-- not run: REASON -->`, few and specific. A command with no Expect here fails: a new command
in Docs comes with what it must do."""
import glob
import os
import sys

import pytest

from doc_commands import (ROOT, Expect, Helps, Runner, inline_commands, inline_problems, marked_blocks, marker_problems,
                          run_commands, unlabelled_commands, unused_expectations)

# Docs/, then the other folders' pages (Profiles/, Scenarios/, Examples/); the README's: test_readme_commands.py.
PAGES = [os.path.relpath(p, ROOT) for folder in ("Docs", "Profiles", "Scenarios", "Examples")
         for p in sorted(glob.glob(os.path.join(ROOT, folder, "**", "*.md"), recursive=True))]
CTL = r"^edge · \d+ connections? \(\d+ open\)"
CAPTURE = f"{sys.executable} {os.path.join(ROOT, 'scripts', 'bench.d', 'capturegen.py')}"

EXPECT = {
    # Docs/control.md: a proxy, changed live by ctl, then by its API with curl
    "netcond proxy captive-hotel &": Expect(
        ready=r"control API on http://127\.0\.0\.1:8081", out=(r"captive-hotel proxy on http://127\.0\.0\.1:8080",),
        probe="curl -sS -x http://127.0.0.1:8080 http://origin.netcond.test/bytes/1KB | wc -c", probe_out=(r"\d",)),
    "netcond ctl status": Expect(out=(r"^captive-hotel · portal closed · \d+ connections? \(\d+ open\) · ↓ ",)),
    "netcond ctl status --json": Expect(out=(r'"profile":"captive-hotel"', r'"captive_portal":"closed"')),
    "netcond ctl captive open": Expect(out=(r"^captive-hotel · portal open · ",)),
    "netcond ctl profile edge": Expect(out=(CTL,)),
    "netcond ctl outage blackhole": Expect(out=(r"^edge · OUTAGE blackhole · ",)),
    "netcond ctl outage end": Expect(out=(CTL,)),
    "netcond ctl stall down": Expect(out=(r"^edge · STALLED down · ",)),
    "netcond ctl stall end": Expect(out=(CTL,)),
    "netcond ctl fault add '{match: {path: /api/*}, status: 503, retry_after: 5s, first: 3}'": Expect(
        out=(r"^added fault 1$", r'^1  \{match: \{path: "/api/\*"\}, status: 503, retry_after: 5s, first: 3\}')),
    "netcond ctl fault list": Expect(out=(r'^1  \{match: \{path: "/api/\*"\}, status: 503, .*\(hit 0 of 0 matching requests\)',)),
    "netcond ctl fault remove 1": Expect(out=(r"^no faults in force$",)),
    "netcond ctl cut": Expect(out=(CTL,)),
    "netcond ctl handover lte --gap 2s": Expect(out=(r"^lte · .*OUTAGE blackhole",)),
    "netcond ctl events": Expect(out=(r"^\+\d+\.\d{3} s  portal opened \(control\)$", r"  link: edge, stalled down$",
                                     r"  link: cut 0 connections \(reset\)$", r"  link: handover to lte, ")),
    "export NETCOND_CONTROL=http://127.0.0.1:8081": Expect(),
    'curl -s "$NETCOND_CONTROL/status"': Expect(out=(r'"profile":"lte"', r'"connections_total":\d+')),
    """curl -s -H 'Content-Type: application/json' -d '{"behaviour": "refuse"}' "$NETCOND_CONTROL/outage\"""": Expect(
        out=(r'"outage":"refuse"',)),
    'curl -s -X DELETE "$NETCOND_CONTROL/outage"': Expect(out=(r'"outage":null',)),
    """curl -s -H 'Content-Type: application/yaml' -d '{status: 503, first: 2}' "$NETCOND_CONTROL/faults\"""": Expect(
        out=(r'"added":2', r'status: 503, first: 2')),
    # Docs/engines.md: the packet engine (root), with a dev server on 127.0.0.1:8000
    "sudo netcond run --engine packet edge -- curl -O http://localhost:8000/big.bin": Expect(
        root=True, out=(r"^netcond: edge \(packet engine\): [\d.]+ s, up .*, down 3\d\d(\.\d)? KB in \d+ packets",),
        files={"big.bin": 300 * 1024}, timeout=180),
    "sudo netcond run --engine packet --pcap run.pcap 3g -- node client.js": Expect(
        root=True, needs=("node",), out=(r"^client\.js fetched 20480 bytes$", r"^netcond: 3g \(packet engine\): "),
        files={"run.pcap": r"(?s).{100}"}),
    'sudo netcond run --engine packet --user "$USER" edge -- ./client': Expect(
        root=True, env={"USER": "nobody"}, out=(r"^client ran as nobody$", r"^netcond: edge \(packet engine\): ")),
    "sudo netcond run --engine packet --seed 4 --pcap link.pcap --pcap-drops drops.pcap wifi-lossy -- "
    "curl -so /dev/null http://origin.netcond.test/bytes/2000000": Expect(
        root=True, out=(r"^netcond: wifi-lossy \(packet engine\): .* \d+ packets lost",),
        files={"link.pcap": r"(?s).{1000}", "drops.pcap": r"(?s).{100}"}, timeout=180),
    "tcpdump -nn -S -tt -r drops.pcap 'src port 80' | awk '{print $1, $9}' > lost.txt": Expect(
        root=True, needs=("tcpdump",), files={"lost.txt": r"^\d+\.\d+ \d+:\d+,$"}),
    "tcpdump -nn -S -tt -r link.pcap 'src port 80' | awk 'NR==FNR {lost[$2]=$1; next} ($9 in lost) "
    """{printf "%s lost at %.3f, back %.3f s later\\n", $9, lost[$9], $1-lost[$9]}' lost.txt -""": Expect(
        root=True, needs=("tcpdump",), out=(r"^\d+:\d+, lost at \d+\.\d{3}, back \d+\.\d{3} s later$",)),
    # Docs/scenarios.md: the transcript (its lines are checked as shown, timings aside)
    """netcond run Scenarios/resume-after-dropout.yaml -- sh -c 'curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'""":
        Expect(code=1),
    """netcond run Scenarios/resume-after-dropout.yaml -- sh -c 'wget -q -O "$NETCOND_OUTPUT" "$NETCOND_URL"'""":
        Expect(code=0),
    # Docs/toxiproxy.md: the API, and a Toxiproxy client of PyPI's toxiproxy-python
    "netcond toxiproxy &": Expect(ready=r"127\.0\.0\.1:8474", probe="curl -s http://127.0.0.1:8474/version",
                                  probe_out=(r"\d+\.\d+",)),
    """python3 -c 'from toxiproxy import Toxiproxy; p = Toxiproxy().create(upstream="127.0.0.1:6379", name="redis", """
    """listen="127.0.0.1:26379"); p.add_toxic(type="latency", attributes={"latency": 100})'""": Expect(
        probe="curl -s http://127.0.0.1:8474/proxies/redis/toxics",
        probe_out=(r'"type":\s*"latency"', r'"latency":\s*100')),
    # Docs/traces.md: a trace recorded from a capture (a generated one: see PAGE_SETUP)
    "netcond trace record train.pcap --from 5 --to 65": Expect(
        out=(r"^window:\s+5\.000 s to 65\.000 s", r"^wrote:\s+train\.trace .*, train\.yaml$"),
        files={"train.yaml": r"train\.trace"}),
    # Scenarios/README.md (the wget line also in scenarios.md's transcript)
    "netcond test Scenarios/ --filter 'backoff-*' -- ./client": Expect(
        code=1, out=(r"^2 scenarios: 0 passed, 2 failed \(backoff-503-retry-after, backoff-connection-refused\)",)),
    # Profiles/measured/README.md
    "netcond run Profiles/measured/akamai-loss-median.yaml -- ./client": Expect(
        out=(r"^client fetched 10240 bytes$", r"^netcond: akamai-loss-median \(Profiles/measured/akamai-loss-median\.yaml\): ")),
    "netcond run train.yaml -- ./client": Expect(
        out=(r"^client ran as root$", r"^client fetched 10240 bytes$", r"^netcond: train \(train\.yaml\): [\d.]+ s, up .*, 1 connection, ")),
}

# What a page's commands need that the page does not show: files and servers of the user's.
PAGE_SETUP = {
    "Docs/traces.md": [f"{CAPTURE} --packets 30000 --idle-every 400 --seed 3 train.pcap"],
}
PAGE_SERVERS = {
    "Docs/engines.md": [(f"{sys.executable} -u -m http.server 8000 --bind 127.0.0.1 --directory www",
                         r"Serving HTTP")],
}

COMMANDS = run_commands(PAGES)


@pytest.fixture(scope="module")
def runner():
    runner = Runner(EXPECT, COMMANDS, PAGE_SERVERS, PAGE_SETUP)
    try:
        yield runner
    finally:
        runner.close()


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_the_command_runs_as_written(runner, command):
    runner.run(command)


def test_a_block_that_is_not_run_says_which_test_runs_it_or_why_none_can():
    problems = marker_problems(marked_blocks(PAGES), max_not_run=6)
    assert not problems, "\n".join(problems)


def test_every_expectation_is_of_a_command_in_docs():
    assert not unused_expectations(EXPECT, COMMANDS)


def test_commands_are_in_shell_blocks():
    """A block of commands says so (```sh, or ```console for a transcript): unlabelled, no test would run it."""
    found = unlabelled_commands(["README.md"] + PAGES)
    assert not found, "\n".join(found)


def test_every_inline_command_names_subcommands_and_options_that_exist():
    """The commands in the prose of README and Docs (`netcond demo --show-scenario`, the headings'
    synopses, `scripts/bench --only 2`) cannot all run as written (PROFILE, FILE, …), but every
    subcommand and option they name must exist."""
    spans = inline_commands(["README.md"] + PAGES)
    assert len(spans) > 100, len(spans)
    problems = inline_problems(spans, Helps())
    assert not problems, "\n".join(problems)
