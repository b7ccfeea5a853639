"""Examples/ResumingClient, a package that depends on netcond by path and tests its client with
NetcondTesting's trait: built and its tests run, as a user of the library would."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "Examples", "ResumingClient")
SCRATCH = os.path.join(ROOT, ".build-examples")  # kept between runs (ignored by git), as .build is


def test_the_example_package_builds_and_its_conditioned_test_passes():
    swift = shutil.which("swift")
    if swift is None:
        pytest.skip("no swift toolchain on PATH")
    build = subprocess.run([swift, "build", "--package-path", EXAMPLE, "--scratch-path", SCRATCH, "--build-tests"],
                           capture_output=True, text=True, timeout=2400)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    test = subprocess.run([swift, "test", "--package-path", EXAMPLE, "--scratch-path", SCRATCH, "--skip-build"],
                          capture_output=True, text=True, timeout=600)
    output = test.stdout + test.stderr
    assert test.returncode == 0, output[-4000:]
    assert "resumesAfterTheConnectionIsCut() passed" in output, output[-4000:]
    # The test printed the link's summary: the cut happened on the emulated link.
    assert "ResumeTests: lte:" in output and "cut by the link" in output, output[-4000:]
