"""The CI examples under Examples/ci/: each valid against its CI system's own schema (check-jsonschema's
vendored copies, no network), and each one's netcond command lines, run as that system would run them
(its variables for part I of N set, its escapes undone), split the shipped scenarios into parts that
together run every scenario once and merge into one report."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import NETCOND

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
EXAMPLES = os.path.join(ROOT, "Examples", "ci")
SCENARIOS = os.path.join(ROOT, "Scenarios")

# file, check-jsonschema's schema, how the system names part I (1-based) of N in a job's environment
SYSTEMS = [
    ("github-actions.yml", "vendor.github-workflows", None),
    ("gitlab-ci.yml", "vendor.gitlab-ci", lambda i, n: {"CI_NODE_INDEX": str(i), "CI_NODE_TOTAL": str(n),
                                                        "CI_PIPELINE_ID": "77"}),
    ("buildkite.yml", "vendor.buildkite", lambda i, n: {"BUILDKITE_PARALLEL_JOB": str(i - 1),
                                                        "BUILDKITE_PARALLEL_JOB_COUNT": str(n),
                                                        "BUILDKITE_BUILD_NUMBER": "77"}),
]


@pytest.mark.parametrize("name,schema,_", SYSTEMS)
def test_each_example_is_valid_for_its_ci_system(name, schema, _):
    if importlib.util.find_spec("check_jsonschema") is None:
        pytest.skip("check-jsonschema is not installed (scripts/test installs it from PyPI)")
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, os.path.join(EXAMPLES, name)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def netcond_lines(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        document = yaml.safe_load(f)
    found = [s.strip() for s in strings(document) if s.strip().startswith("./netcond ")]
    tests = [s for s in found if s.startswith("./netcond test ")]
    merges = [s for s in found if s.startswith("./netcond report merge ")]
    assert len(tests) == 1 and len(merges) == 1, found
    return tests[0], merges[0]


@pytest.mark.parametrize("name,_,environment", SYSTEMS)
def test_each_examples_commands_split_the_scenarios_and_merge_them(tmp_path, name, _, environment):
    parts = 4
    test_line, merge_line = netcond_lines(name)
    assert f"--shard" in test_line
    os.symlink(os.path.abspath(NETCOND), tmp_path / "netcond")
    os.symlink(os.path.abspath(SCENARIOS), tmp_path / "Scenarios")
    client = tmp_path / "client"
    client.write_text("#!/bin/sh\nexit 0\n")  # asks for nothing: the verdicts do not matter here
    client.chmod(0o755)
    for index in range(1, parts + 1):
        line = test_line
        env = dict(os.environ)
        if environment is None:  # GitHub Actions fills in its expressions before the shell runs
            line = line.replace("${{ matrix.part }}", str(index)).replace("${{ github.run_id }}", "77")
            assert "${{" not in line, line
        else:
            env.update(environment(index, parts))
            line = line.replace("$$", "$")  # Buildkite's escape for a variable the job's shell reads
        r = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode in (0, 1), r.stdout + r.stderr
        assert f"part {index}/{parts} holds" in r.stderr, r.stderr
        assert (tmp_path / f"part-{index}.json").exists() and (tmp_path / f"part-{index}.xml").exists()
    r = subprocess.run(["bash", "-c", merge_line], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    merged = json.loads((tmp_path / "report.json").read_text())
    page = (tmp_path / "report.html").read_text()
    assert page.count('<section class="scenario"') == len(merged["scenarios"])
    names = [s["name"] for s in merged["scenarios"]]
    shipped = [f for f in os.listdir(SCENARIOS) if f.endswith(".yaml")]
    assert len(names) == len(set(names)) == len(shipped)
    assert merged["merged"] == [f"{i}/{parts}" for i in range(1, parts + 1)]
    # A machine that died before writing its report: the merge refuses to judge without it.
    os.remove(tmp_path / "part-3.json")
    r = subprocess.run(["bash", "-c", merge_line], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "part 3/4 of the run is missing" in r.stderr, r.stderr
