"""The README's "Using it" commands, run as written with netcond on the PATH: the programs they
name (client.py, ./app, ./sync-client, my-link.yaml) are small stand-ins in a folder of the
test's, beside the project's Scenarios/ and Profiles/. The lines that start a server and wait
for Ctrl-C, or drive one, or run the whole suite, are left to the tests of those commands
(named below); every other line must exit 0."""
import os
import re
import socket
import subprocess

import pytest

from conftest import NETCOND

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Lines (by their start) other tests run: what waits for Ctrl-C, what needs a server, the suite.
ELSEWHERE = {
    "netcond proxy ": "test_proxy.py and test_control.py",
    "netcond ctl ": "test_control.py",
    "netcond toxiproxy": "test_toxiproxy.py",
    "netcond test ": "test_suite.py and test_gallery.py",
}


def using_it():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = re.search(r"## Using it\n\n```sh\n(.*?)```", readme, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def port_taken(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def folder_with_stand_ins(tmp_path):
    for name, text in (("client.py", "print('client ran')\n"), ("app", "#!/bin/sh\necho app ran\n"),
                       ("sync-client", "#!/bin/sh\necho synced\n"), ("my-link.yaml", "extends: edge\n")):
        path = tmp_path / name
        path.write_text(text)
        path.chmod(0o755)
    for folder in ("Scenarios", "Profiles"):
        os.symlink(os.path.join(ROOT, folder), tmp_path / folder)
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    os.symlink(NETCOND, bin_folder / "netcond")
    return dict(os.environ, PATH=f"{bin_folder}{os.pathsep}{os.environ['PATH']}")


def test_the_readme_commands_run_as_written(tmp_path):
    env = folder_with_stand_ins(tmp_path)
    env.pop("NETCOND_SEED", None)
    ran = []
    for line in using_it():
        if any(line.startswith(start) for start in ELSEWHERE):
            continue
        if "--forward 127.0.0.1:5432=" in line and port_taken(5432):
            continue  # a PostgreSQL on this machine holds the example's port
        result = subprocess.run(["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, (line, result.stdout[-2000:], result.stderr[-2000:])
        ran.append(line)
    assert len(ran) >= 8, ran
    assert os.path.getsize("/tmp/x") == 200 * 1024
    os.remove("/tmp/x")
