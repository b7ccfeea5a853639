"""The README's commands, run as written with netcond on the PATH (doc_commands.py says how; the
Docs pages' are test_docs_commands.py's): the programs they name (client.py, ./app, ./sync-client,
./client, my-link.yaml) are small stand-ins in the session's folder, beside the project's
Scenarios/ and Profiles/; `netcond proxy` and `netcond toxiproxy` are started, probed, changed by
`netcond ctl` and stopped with Ctrl-C; the transcript's lines are checked as shown."""
import os

import pytest

from doc_commands import Expect, Runner, marked_blocks, marker_problems, run_commands, unused_expectations

PAGES = ["README.md"]
ORIGIN_CURL = "curl -sS -x http://127.0.0.1:8080 -o /dev/null -w '%{http_code} %{size_download}' "

EXPECT = {
    "netcond run edge -- curl -o /tmp/x http://origin.netcond.test/bytes/200KB": Expect(
        out=(r"^netcond: edge: [\d.]+ s, up .*, down 20\d(\.\d)? KB, 1 connection",), files={"/tmp/x": 200 * 1024}),
    "netcond run Profiles/3g.yaml -- python3 client.py": Expect(out=(r"^client ran$", r"^netcond: 3g \(Profiles/3g\.yaml\): ")),
    "netcond run lte --forward 127.0.0.1:5432=db.local:5432 -- ./app": Expect(
        out=(r"^app ran$", r"^app connected to 127\.0\.0\.1:5432$", r"^netcond: lte: ")),
    "netcond proxy 3g --listen 127.0.0.1:8080": Expect(
        server=True, out=(r"^netcond: 3g proxy on http://127\.0\.0\.1:8080 ", r"control API on http://127\.0\.0\.1:8081"),
        probe=ORIGIN_CURL + "http://origin.netcond.test/bytes/1KB", probe_out=(r"^200 1024$",)),
    "netcond ctl outage refuse": Expect(
        out=(r"^3g · OUTAGE refuse · 1 connection \(0 open\)",),
        probe=ORIGIN_CURL + "http://origin.netcond.test/bytes/1KB", probe_out=(r"^(000|502) 0",)),
    "netcond run subway -- ./sync-client": Expect(out=(r"^synced$", r"^netcond: subway: ")),
    """netcond run Scenarios/resume-after-dropout.yaml -- sh -c 'wget -q -O "$NETCOND_OUTPUT" "$NETCOND_URL"'""": Expect(
        out=(r"^✓ completes — exit 0 after [\d.]+s; big\.bin: 2,097,152 bytes identical", r"^✓ resumes — cut at 614,400 → Range: bytes=614400-")),
    # Every scenario fails the stand-in ./client but for the few it passes doing nothing; the one of
    # the packet engine only cannot run (exit 3) without root.
    "netcond test Scenarios/ --junit report.xml -- ./client": Expect(
        code=1 if os.geteuid() == 0 else 3, out=(r"^\d+ scenarios: \d+ passed, \d+ failed \(",),
        files={"report.xml": r'<testsuites [^>]*tests="\d\d"'}),
    "netcond profiles": Expect(out=(r"^NAME +DOWN +UP ", r"^edge +240kbit +200kbit ", r"^satellite-geo ", r"^none ")),
    "netcond profiles show satellite-geo": Expect(out=(r"latency: 340ms",)),
    "netcond validate my-link.yaml Scenarios/*.yaml": Expect(out=(r"^ok: my-link\.yaml \(profile my-link\)$",
                                                                 r"^ok: Scenarios/resume-after-dropout\.yaml \(scenario resume-after-dropout, ")),
    "netcond toxiproxy": Expect(server=True, ready=r"127\.0\.0\.1:8474", probe="curl -sS http://127.0.0.1:8474/version",
                                probe_out=(r"\d+\.\d+\.\d+",)),
    "netcond --version": Expect(out=(r"^\d+\.\d+\.\d+ \(\w+",)),
    "netcond --generate-completion-script bash | sudo tee /etc/bash_completion.d/netcond > /dev/null": Expect(
        root=True, private=("/etc/bash_completion.d",), out=(r"^== /etc/bash_completion\.d/netcond$", r"complete .*netcond")),
    # zsh: a user whose fpath starts with a folder of theirs (the session's zfunc/); fish: HOME is the session's.
    'netcond --generate-completion-script zsh > "${fpath[1]}/_netcond"': Expect(
        shell="zsh", env={"FPATH": "zfunc"}, files={"zfunc/_netcond": r"^#compdef netcond$"}),
    "mkdir -p ~/.config/fish/completions && netcond --generate-completion-script fish > ~/.config/fish/completions/netcond.fish":
        Expect(shell="fish", files={".config/fish/completions/netcond.fish": r"^complete -c '?netcond'? "},
               probe="""fish -c 'complete -C "netcond prof"'""", probe_out=(r"^profiles\b",)),
    # The transcript: its lines are checked as shown (timings aside).
    """netcond run Scenarios/resume-after-dropout.yaml -- sh -c 'curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"'""":
        Expect(code=1),
}

COMMANDS = run_commands(PAGES)


@pytest.fixture(scope="module")
def runner():
    runner = Runner(EXPECT, COMMANDS)
    try:
        yield runner
    finally:
        runner.close()
        if os.path.exists("/tmp/x"):
            os.remove("/tmp/x")


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_the_readme_command_runs_as_written(runner, command):
    runner.run(command)


def test_the_readme_runs_its_commands_and_marks_the_others():
    assert len(COMMANDS) >= 15, [c.where for c in COMMANDS]
    problems = marker_problems(marked_blocks(PAGES), max_not_run=1)
    assert not problems, "\n".join(problems)
    assert not unused_expectations(EXPECT, COMMANDS)
