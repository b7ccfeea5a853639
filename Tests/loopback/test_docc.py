"""NetcondTesting's reference, built with DocC (swift-docc-plugin) as a user would build it: the
catalog (Sources/NetcondTesting/NetcondTesting.docc) and every public symbol's page are made, and
no symbol link in the library's comments or its catalog points at nothing."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_the_netcond_testing_reference_builds_with_every_link_resolved():
    swift = shutil.which("swift")
    if swift is None:
        pytest.skip("no swift toolchain on PATH")
    with tempfile.TemporaryDirectory(prefix="netcond-docc-") as folder:
        output = os.path.join(folder, "out")
        r = subprocess.run([swift, "package", "--package-path", ROOT, "--allow-writing-to-directory", output,
                            "generate-documentation", "--target", "NetcondTesting", "--output-path", output,
                            "--disable-indexing"], capture_output=True, text=True, timeout=2400,
                           env=dict(os.environ, TMPDIR=folder))
        text = r.stdout + r.stderr
        assert r.returncode == 0, text[-4000:]
        unresolved = [line for line in text.splitlines() if "doesn't exist at" in line]
        assert not unresolved, "\n".join(unresolved)
        pages = os.path.join(output, "data", "documentation", "netcondtesting")
        for symbol in ("conditionednetwork", "netcond", "networktrait", "networkprofile", "scenarioreport"):
            assert os.path.exists(os.path.join(pages, symbol + ".json")), symbol
        with open(os.path.join(output, "data", "documentation", "netcondtesting.json")) as f:
            root = json.load(f)
        # The catalog's overview is the module's page, with its topics.
        titles = [section.get("title") for section in root.get("topicSections", [])]
        assert "Starting a network" in titles and "Scenarios judged against a function" in titles, titles
