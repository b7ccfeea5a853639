"""The shell commands of the project's Markdown, run as written (test_docs_commands.py for Docs/,
test_readme_commands.py for the README).

Every fenced ```sh, ```bash or ```shell block, and every ```console block (or unlabelled one that
starts with `$ `: a transcript, whose lines after a `$ ` command are what it prints), is cut into
commands (a line, with the lines a trailing backslash or an open quote carries on). A block that
cannot run here as written has, on the lines right before its fence, a visible marker:

    <!-- run by: Tests/loopback/test_X.py::test_name -->    (the test that runs what it shows)
    <!-- not run: REASON -->                                (why nothing can: a cluster, a registry)

Every other command is run in order, page by page, each page in a session of its own: a folder
with stand-ins for the programs the pages name (./client, ./app, client.js, a dev server …), a
`netcond` (NETCOND_BIN) and, as root, a `sudo` on the PATH, and — as root — a network namespace of
its own with only a loopback, so the ports the pages name (8080, 8081, 8474, 8000 …) are this
run's whatever else runs on the machine. A command ending in `&`, or one that serves until Ctrl-C
(`netcond proxy`, `netcond toxiproxy`), is started, waited for, probed, and stopped with Ctrl-C
(SIGINT) when the page ends. Each command has an Expect: its exit code and what its output must
say, and what a probe of what it started must answer.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import pytest

from conftest import NETCOND

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MARKER = re.compile(r"^\s*<!--\s*(run by|not run):\s*(.*?)\s*-->\s*$")
SHELL_LANGS = {"sh", "bash", "shell", "console"}
IS_ROOT = os.geteuid() == 0


@dataclass
class Command:
    page: str          # relative to ROOT
    line: int          # 1-based, of its first line
    text: str          # as written (with its comment), what the shell runs
    shown: list = field(default_factory=list)   # a transcript's lines after it: what it prints

    @property
    def where(self):
        return f"{self.page}:{self.line}"

    @property
    def key(self):
        """The command without its trailing comment and with runs of spaces as one."""
        return " ".join(without_comment(self.text).replace("\\\n", " ").split())


@dataclass
class Block:
    page: str
    line: int
    lang: str
    markers: list      # [(kind, text)]
    commands: list


def without_comment(text):
    """The text up to a `#` that starts a shell comment (outside quotes, at the start of a word)."""
    quote, out, previous = None, [], " "
    for i, char in enumerate(text):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and previous in " \t\n":
            rest = text[i:]
            newline = rest.find("\n")
            if newline < 0:
                break
            text_after = without_comment(rest[newline:])
            return ("".join(out) + text_after).strip()
        out.append(char)
        previous = char
    return "".join(out).strip()


def complete(text):
    """Whether a command's text is whole: no trailing backslash, no open quote."""
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def blocks(page):
    """The shell blocks of a Markdown page (a path relative to ROOT), with their markers."""
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().split("\n")
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, lang, start = len(fence.group(1)), fence.group(2), i
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append((i + 1, lines[i][indent:]))
            i += 1
        i += 1
        transcript = lang == "console" or (lang == "" and body and body[0][1].startswith("$ "))
        if lang not in SHELL_LANGS and not transcript:
            continue
        markers, k = [], start - 1
        while k >= 0 and MARKER.match(lines[k]):
            markers.insert(0, MARKER.match(lines[k]).groups())
            k -= 1
        found.append(Block(page, start + 1, lang, markers, commands_of(page, body, transcript)))
    return found


def commands_of(page, body, transcript):
    commands, pending = [], None
    for number, text in body:
        if pending is not None:
            pending.text += "\n" + text
            if complete(pending.text):
                pending = None
            continue
        if transcript and not text.startswith("$ "):
            if commands:
                commands[-1].shown.append(text)
            continue
        if transcript:
            text = text[2:]
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        commands.append(Command(page, number, text))
        if not complete(text):
            pending = commands[-1]
    return commands


def unlabelled_commands(pages):
    """Lines of fenced blocks of no language that read as commands
    (`netcond …`, `sudo …`, `scripts/…`): a block of commands must say it is one, or no test runs it."""
    found = []
    for page in pages:
        fence = None
        for number, line in enumerate(open(os.path.join(ROOT, page), encoding="utf-8"), 1):
            opened = re.match(r"^\s*```(\w*)\s*$", line)
            if opened and fence is None:
                fence = opened.group(1)
            elif line.strip().startswith("```"):
                fence = None
            elif fence == "" and re.match(r"^\s*(sudo |scripts/\w|netcond )", line):
                found.append(f"{page}:{number}: {line.strip()}")
    return found


def run_commands(pages):
    """The commands of the pages' blocks without a marker, in order."""
    return [c for page in pages for b in blocks(page) if not b.markers for c in b.commands]


def marked_blocks(pages):
    return [b for page in pages for b in blocks(page) if b.markers]


@dataclass
class Expect:
    """What a command must do. `code`: its exit code; `out`: regular expressions its output
    (stdout and stderr) must match; `probe`: a command run in the session after it (after a server
    is ready) whose output must match `probe_out`; `files`: path (in the session's folder, or
    absolute) -> a regular expression its content must match, or a size in bytes."""
    out: tuple = ()
    code: int = 0
    server: bool = False          # starts a server that runs until the page ends (Ctrl-C)
    ready: str = None             # what a server prints once it serves
    probe: str = None
    probe_out: tuple = ()
    files: dict = field(default_factory=dict)
    root: bool = False            # needs root (sudo; the packet engine)
    shell: str = "sh"
    needs: tuple = ()             # programs it runs (skipped, saying so, when one is not installed)
    private: tuple = ()           # folders it writes outside the session, given a private tmpfs (root)
    env: dict = field(default_factory=dict)
    timeout: float = 120


# What talks to a port the page names (or ctl's default, 127.0.0.1:8081).
OWN_PORTS = re.compile(r"127\.0\.0\.1:\d+|localhost:\d+|netcond ctl|NETCOND_CONTROL")


STAND_INS = {
    "client.py": "print('client ran')\n",
    "app": "#!/bin/sh\necho app ran\n"  # a program that takes an address: the forward's
           "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 5432), 10).close(); "
           "print('app connected to 127.0.0.1:5432')\"\n",
    "sync-client": "#!/bin/sh\necho synced\n",
    "client": "#!/bin/sh\necho \"client ran as $(id -un)\"\n"  # and, outside a scenario, a download
              '[ -n "$NETCOND_URL" ] || curl -sS -m 60 -o /dev/null -w "client fetched %{size_download} bytes\\n" '
              "http://origin.netcond.test/bytes/10KB\n",
    "my-link.yaml": "extends: edge\n",
    "client.js": "fetch('http://origin.netcond.test/bytes/20KB').then(r => r.arrayBuffer())"
                 ".then(b => console.log('client.js fetched ' + b.byteLength + ' bytes'))"
                 ".catch(e => { console.error(e); process.exit(1) })\n",
    "www/big.bin": None,  # 300 KB from the dev server engines.md names
    "zfunc/.keep": "",    # the first folder of a zsh user's fpath (FPATH=zfunc)
}


class Session:
    """One page's folder, PATH, network namespace and servers."""

    def __init__(self, page, servers=(), setup=()):
        self.page = page
        self.folder = tempfile.mkdtemp(prefix="netcond-docs-")
        os.chmod(self.folder, 0o755)  # `--user NAME` runs ./client as NAME
        for name, text in STAND_INS.items():
            path = os.path.join(self.folder, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(text.encode() if text is not None else os.urandom(300 * 1024))
            os.chmod(path, 0o755)
        for folder in ("Scenarios", "Profiles", "deploy"):
            os.symlink(os.path.join(ROOT, folder), os.path.join(self.folder, folder))
        bin_folder = os.path.join(self.folder, "bin")
        os.mkdir(bin_folder)
        os.chmod(bin_folder, 0o755)
        os.symlink(os.path.abspath(NETCOND), os.path.join(bin_folder, "netcond"))
        if IS_ROOT:
            with open(os.path.join(bin_folder, "sudo"), "w") as f:
                f.write('#!/bin/sh\nexec "$@"\n')  # already root: as sudo would, runs the command
            os.chmod(os.path.join(bin_folder, "sudo"), 0o755)
        self.env = dict(os.environ, PATH=f"{bin_folder}{os.pathsep}{os.environ['PATH']}", HOME=self.folder)
        for name in ("NETCOND_SEED", "NETCOND_CONTROL", "NETCOND_CONTROL_TOKEN", "http_proxy", "https_proxy",
                     "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            self.env.pop(name, None)
        self.namespace = None
        self.servers = []   # (Command, Popen, output file)
        try:
            if IS_ROOT and shutil.which("nsenter") and shutil.which("ip"):
                name = f"netcond-docs-{os.getpid()}-{os.path.basename(self.folder)[-8:]}"
                if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0:
                    self.namespace = name
                    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
            for text in setup:
                made = self.run(text, Expect())
                assert made.returncode == 0, f"{page}'s set-up {text!r}: {made.stdout}{made.stderr}"
            for text, ready in servers if self.namespace else ():  # without one, run_one skips the page
                self.start(Command(page, 0, text), Expect(server=True, ready=ready))
        except BaseException:
            self.close()
            raise

    def argv(self, text, shell="sh"):
        """The argv that runs `text` with `shell` in the session's network namespace."""
        argv = [shell, "-c", text]
        if self.namespace:
            argv = ["nsenter", f"--net=/run/netns/{self.namespace}"] + argv
        return argv

    def run(self, text, expect):
        argv = self.argv(text, expect.shell)
        if expect.private:
            mounts = " && ".join(f"mkdir -p {shlex.quote(p)} && mount -t tmpfs netcond-docs {shlex.quote(p)}"
                                 for p in expect.private)
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    mounts + ' && "$@"; code=$?; for f in ' + " ".join(shlex.quote(p) for p in expect.private)
                    + '; do find "$f" -type f -exec sh -c \'echo "== $1"; cat "$1"\' sh {} \\;; done; exit $code',
                    "sh"] + argv
        return subprocess.run(argv, cwd=self.folder, env=dict(self.env, **expect.env), capture_output=True,
                              text=True, timeout=expect.timeout, start_new_session=True)

    def start(self, command, expect):
        """Starts a server (`&` or one that serves until Ctrl-C) and waits until it says it serves."""
        text = without_comment(command.text).rstrip().rstrip("&").rstrip()
        log = open(os.path.join(self.folder, f".server-{len(self.servers)}.log"), "w+")
        # Ctrl-C stops it, as in a terminal, even when this run inherited SIGINT ignored (started in
        # the background by a script: CI), which a child would keep.
        process = subprocess.Popen(self.argv("exec " + text), cwd=self.folder, env=self.env, stdout=log,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.servers.append((command, process, log))
        ready = expect.ready or r"(proxy|API) on http://"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            log.seek(0)
            seen = log.read()
            if re.search(ready, seen):
                return seen
            if process.poll() is not None:
                break
            time.sleep(0.1)
        log.seek(0)
        raise AssertionError(f"{command.where}: {command.text!r} did not say {ready!r} within 30 s "
                             f"(exit {process.poll()}):\n{log.read()[-3000:]}")

    def close(self):
        """Stops the servers as Ctrl-C does (then their whole process groups), removes the
        namespace and the folder; returns [(command, exit code, output)] of the servers."""
        stopped = []
        for command, process, log in reversed(self.servers):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
            try:
                code = process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                code = process.wait(timeout=10)
            try:
                os.killpg(process.pid, signal.SIGKILL)  # what it left in its group
            except ProcessLookupError:
                pass
            log.seek(0)
            stopped.append((command, code, log.read()))
            log.close()
        self.servers = []
        if self.namespace:
            subprocess.run(["ip", "netns", "delete", self.namespace], capture_output=True)
            self.namespace = None
        shutil.rmtree(self.folder, ignore_errors=True)
        return stopped


def shown_patterns(shown):
    """A transcript's lines as patterns: each as printed, its timings (0.86s, +1.84s) any timing."""
    patterns = []
    for line in shown:
        escaped = re.escape(line.strip())
        patterns.append(re.sub(r"\d+\\\.\d+s", r"\\d+\\.\\d+s", escaped))
    return tuple(patterns)


class Runner:
    """Runs the commands of pages in order, a session per page: made for its first command, closed
    after its last one (whose test then also checks that the page's servers stopped on Ctrl-C)."""

    def __init__(self, expectations, commands, page_servers=None, page_setup=None):
        self.expectations = expectations
        self.last_of_page = {c.page: c for c in commands}
        self.page_servers = page_servers or {}
        self.page_setup = page_setup or {}
        self.session = None

    def close(self):
        """Closes the session; returns what was wrong with how its servers stopped."""
        problems = []
        if self.session:
            session, self.session = self.session, None
            for command, code, output in session.close():
                if code not in (0, 130, -signal.SIGINT):
                    problems.append(f"{command.where}: {command.text!r} exited {code} on Ctrl-C:\n{output[-2000:]}")
        return problems

    def expect_for(self, command):
        expect = self.expectations.get(command.key)
        if expect is None and command.shown:
            expect = Expect()
        assert expect is not None, (f"{command.where}: no Expect for {command.key!r}: say what it must do "
                                    "(in the test's EXPECT), or mark its block <!-- not run: … --> / "
                                    "<!-- run by: … -->")
        if command.shown:
            expect = Expect(**dict(expect.__dict__, out=tuple(expect.out) + shown_patterns(command.shown)))
        return expect

    def run(self, command):
        try:
            output = self.run_one(command)
        finally:
            stopped = self.close() if self.last_of_page.get(command.page) is command else []
        assert not stopped, "\n".join(stopped)
        return output

    def run_one(self, command):
        expect = self.expect_for(command)
        if (expect.root or expect.private) and not IS_ROOT:
            pytest.skip("needs root (sudo, the packet engine, a private mount): these tests run as root")
        for program in {expect.shell, *expect.needs}:
            if not shutil.which(program):
                pytest.skip(f"{program} is not installed (scripts/test installs it)")
        if self.session is None or self.session.page != command.page:
            self.close()
            self.session = Session(command.page, self.page_servers.get(command.page, ()),
                                   self.page_setup.get(command.page, ()))
        session = self.session
        serves = command.key.endswith("&") or expect.server
        if not session.namespace and (serves or expect.probe or session.servers or self.page_servers.get(command.page)
                                      or OWN_PORTS.search(command.text)):
            pytest.skip("it uses ports the page names (8080, 8081, 8474 …), which without root (no network "
                        "namespace of this run's own) may be another run's")
        exported = re.match(r"^export (\w+)=(\S+)$", command.key)
        if exported:
            session.env[exported.group(1)] = exported.group(2)
        if serves:
            output, code = session.start(command, expect), 0
        else:
            result = session.run(command.text, expect)
            output, code = result.stdout + result.stderr, result.returncode
        problems = []
        if code != expect.code:
            problems.append(f"exit {code}, want {expect.code}")
        problems += [f"output does not match {p!r}" for p in expect.out if not re.search(p, output, re.M)]
        if expect.probe:
            probe = session.run(expect.probe, Expect(timeout=60))
            probed = probe.stdout + probe.stderr
            output += f"\n--- probe {expect.probe!r} (exit {probe.returncode}):\n{probed}"
            problems += [f"probe {expect.probe!r} does not match {p!r}" for p in expect.probe_out
                         if not re.search(p, probed, re.M)]
        for path, want in expect.files.items():
            full = path if os.path.isabs(path) else os.path.join(session.folder, path)
            if not os.path.exists(full):
                problems.append(f"{path} was not written")
            elif isinstance(want, int) and os.path.getsize(full) != want:
                problems.append(f"{path} is {os.path.getsize(full)} bytes, want {want}")
            elif isinstance(want, str) and not re.search(want, open(full, errors="replace").read(), re.M):
                problems.append(f"{path} does not match {want!r}")
        assert not problems, f"{command.where}: {command.text}\n" + "\n".join(problems) + "\n" + output[-4000:]
        return output


def marker_problems(block_list, max_not_run):
    """What is wrong with the markers: a `run by` naming a file or test function that does not
    exist, a `not run` without a specific reason, or too many of them."""
    problems, not_run = [], 0
    for block in block_list:
        where = f"{block.page}:{block.line}"
        for kind, text in block.markers:
            if kind == "run by":
                for target in re.split(r"\s*,\s*", text):
                    match = re.match(r"^(Tests/[\w/.-]+\.py)::(\w+)$", target)
                    if not match:
                        problems.append(f"{where}: run by {target!r}: want Tests/…/test_x.py::test_name")
                        continue
                    path = os.path.join(ROOT, match.group(1))
                    if not os.path.exists(path):
                        problems.append(f"{where}: run by {target!r}: no such file")
                    elif not re.search(rf"^\s*def {match.group(2)}\(", open(path, encoding="utf-8").read(), re.M):
                        problems.append(f"{where}: run by {target!r}: no function {match.group(2)} in it")
            else:
                not_run += 1
                vague = re.search(r"\b(slow|flaky|todo|later|broken|cannot run here|can't run|does not work)\b",
                                  text, re.I)
                if len(text.split()) < 5 or vague:
                    problems.append(f"{where}: not run: {text!r}: say what it needs that this machine has not")
    if not_run > max_not_run:
        problems.append(f"{not_run} blocks are not run (at most {max_not_run}): run them, or name the test that does")
    return problems


INLINE = re.compile(r"`((?:sudo )?(?:netcond|scripts/[\w.-]+)(?: [^`]*)?)`")


def inline_commands(pages):
    """The inline code spans of the pages' prose that are commands (`netcond …`, `scripts/…`):
    [(page:line, span)]."""
    found = []
    for page in pages:
        fence = False
        for number, line in enumerate(open(os.path.join(ROOT, page), encoding="utf-8"), 1):
            if line.lstrip().startswith("```"):
                fence = not fence
            elif not fence:
                found += [(f"{page}:{number}", span) for span in INLINE.findall(line)]
    return found


class Helps:
    """netcond's help texts, by subcommand path (each asked once)."""

    def __init__(self):
        self.texts = {}

    def help(self, path):
        if path not in self.texts:
            result = subprocess.run([NETCOND, *path, "--help"], capture_output=True, text=True, timeout=60)
            self.texts[path] = result.stdout + result.stderr if result.returncode == 0 else None
        return self.texts[path]

    def subcommands(self, path):
        text = self.help(path) or ""
        listed = text.split("SUBCOMMANDS:", 1)[1] if "SUBCOMMANDS:" in text else ""
        return {m.group(1): bool(m.group(2)) for m in re.finditer(r"^  ([a-z][\w-]*)( \(default\))?", listed, re.M)}


def inline_problems(spans, helps):
    """What an inline command names that is not there: a netcond subcommand, an option netcond's
    help for that command (or those above it, or below it when it names a group) does not list, a script,
    or an option its source does not mention. What follows ` -- ` is the command's own."""
    problems = []
    for where, span in spans:
        words = span.split(" -- ")[0].split()
        if words[0] == "sudo":
            words = words[1:]
        options = [w.split("=")[0] for w in words if re.match(r"^--[a-z][a-z0-9-]*", w)]
        options = [re.match(r"^--[a-z][a-z0-9-]*", o).group(0) for o in options]
        if words[0].startswith("scripts/"):
            path = os.path.join(ROOT, words[0])
            if not os.path.exists(path):
                problems.append(f"{where}: `{span}`: no {words[0]}")
                continue
            source = open(path, encoding="utf-8", errors="replace").read() if os.path.isfile(path) else ""
            problems += [f"{where}: `{span}`: {words[0]} has no {o}" for o in options
                         if os.path.isfile(path) and o not in source]
            continue
        path, texts = (), [helps.help(())]
        for word in words[1:]:
            subcommands = helps.subcommands(path)
            if word in subcommands:
                path += (word,)
                texts.append(helps.help(path))
            elif not word.startswith("-") and path == () and re.match(r"^[a-z]+$", word) and not options:
                problems.append(f"{where}: `{span}`: netcond has no subcommand {word!r}")
                break
        below = helps.subcommands(path)  # a group's options are its subcommands' (`ctl --control URL status`)
        texts += [helps.help(path + (name,)) for name in below]
        help_text = "\n".join(t for t in texts if t)
        problems += [f"{where}: `{span}`: `netcond {' '.join(path)} --help` lists no {o}"
                     for o in options if not re.search(re.escape(o) + r"(?![a-z0-9-])", help_text)]
    return problems


def unused_expectations(expectations, commands):
    keys = {c.key for c in commands}
    return [k for k in expectations if k not in keys]


if __name__ == "__main__":  # lists what the pages hold: python3 Tests/loopback/doc_commands.py README.md Docs/*.md
    for page in sys.argv[1:]:
        for block in blocks(page):
            print(f"{page}:{block.line} {block.lang} {block.markers}")
            for c in block.commands:
                print(f"  {c.line}: {c.key}")
