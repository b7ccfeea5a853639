"""action.yml, netcond as a GitHub Action: valid against the action-metadata schema
(check-jsonschema's vendored copy, no network), and its scenario step run here as GitHub's runner
runs it (a bash script, the inputs in its environment, GITHUB_OUTPUT a file): one part of the
suite, with the reports it uploads. The build step (a release build, `swift build -c release
--product netcond`) is stood in for by this suite's own build."""
import importlib.util
import os
import subprocess
import sys

import pytest
import yaml

from conftest import NETCOND

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ACTION = os.path.join(ROOT, "action.yml")


def steps():
    with open(ACTION) as f:
        return yaml.safe_load(f)["runs"]["steps"]


def test_the_action_is_valid_action_metadata():
    if importlib.util.find_spec("check_jsonschema") is None:
        pytest.skip("check-jsonschema is not installed (scripts/test installs it from PyPI)")
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-actions", ACTION],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    build = next(s for s in steps() if s.get("name") == "build netcond")
    assert "swift build -c release" in build["run"] and "--product netcond" in build["run"]
    assert 'NETCOND=$GITHUB_ACTION_PATH/.build/release/netcond' in build["run"]


@pytest.mark.parametrize("client", ['curl -sS -o "$NETCOND_OUTPUT" "$NETCOND_URL"', "exit 0"])
def test_the_scenario_step_runs_one_part_and_leaves_its_reports(tmp_path, client):
    step = next(s for s in steps() if s.get("id") == "test")
    assert "${{" not in step["run"], "the script reads its inputs from the environment only"
    os.symlink(os.path.join(ROOT, "Scenarios"), tmp_path / "Scenarios")
    output = tmp_path / "github-output"
    env = dict(os.environ, NETCOND=os.path.abspath(NETCOND), SCENARIOS="Scenarios/", CLIENT=client, SHARD="7/9",
               SEED="77", GITHUB_OUTPUT=str(output))
    r = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=900)
    # The verdict is the exit code: a client that asks for nothing fails the part; curl may pass or fail it.
    assert r.returncode in ((1,) if client == "exit 0" else (0, 1)), r.stdout[-3000:] + r.stderr[-3000:]
    assert "part 7/9 holds" in r.stderr, r.stderr[-2000:]
    assert (tmp_path / "netcond-part-7.xml").exists() and (tmp_path / "netcond-part-7.json").exists()
    assert output.read_text().splitlines() == ["junit=netcond-part-7.xml", "part=7"]
