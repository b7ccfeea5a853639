"""Docs/netcond-testing.md's Swift example, as a user copies it: its Package.swift lines and its
tests, in a package of their own beside a small `MyClient` (Tests/loopback/docs_package), built
and run against this tree by path. Both tests must pass: a page over EDGE (its bytes counted, an
outage started from the test), and a shipped scenario judged against a resuming downloader."""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(ROOT, "Docs", "netcond-testing.md")
SCRATCH = os.path.join(ROOT, ".build-docs-example")  # kept between runs (ignored by git), as .build is


def swift_blocks():
    return re.findall(r"```swift\n(.*?)```", open(DOC, encoding="utf-8").read(), re.S)


def make_package(folder):
    manifest, tests = swift_blocks()[:2]
    assert manifest.startswith("// Package.swift")
    # As the page says for a clone beside the package: by path, named.
    lines = manifest.replace('.package(url: "<netcond\'s repository>", branch: "main")',
                             f'.package(name: "netcond", path: "{ROOT}")')
    assert ROOT in lines, "the page's dependency line changed: update this test"
    body = lines.split("\n", 1)[1]
    with open(os.path.join(folder, "Package.swift"), "w") as f:
        f.write('// swift-tools-version:6.0\nimport PackageDescription\n\nlet package = Package(\n'
                '    name: "MyClient",\n    platforms: [.macOS(.v14)],\n' + body.rstrip().rstrip(",") + "\n)\n")
    os.makedirs(os.path.join(folder, "Sources", "MyClient"))
    for source in (os.path.join(ROOT, "Tests", "loopback", "docs_package", "MyClient.swift"),
                   os.path.join(ROOT, "Examples", "ResumingClient", "Sources", "ResumingClient", "Downloader.swift")):
        shutil.copy(source, os.path.join(folder, "Sources", "MyClient"))
    os.makedirs(os.path.join(folder, "Tests", "MyClientTests"))
    with open(os.path.join(folder, "Tests", "MyClientTests", "Example.swift"), "w") as f:
        f.write(tests)
    os.makedirs(os.path.join(folder, "Tests", "Scenarios"))
    shutil.copy(os.path.join(ROOT, "Scenarios", "resume-after-dropout.yaml"), os.path.join(folder, "Tests", "Scenarios"))


def test_the_swift_example_builds_and_its_tests_pass_as_written():
    swift = shutil.which("swift")
    if swift is None:
        pytest.skip("no swift toolchain on PATH")
    with tempfile.TemporaryDirectory(prefix="netcond-docs-example-") as folder:
        package = os.path.join(folder, "MyClient")
        os.makedirs(package)
        make_package(package)
        env = dict(os.environ, TMPDIR=folder)
        build = subprocess.run([swift, "build", "--package-path", package, "--scratch-path", SCRATCH, "--build-tests"],
                               capture_output=True, text=True, timeout=2400, env=env)
        assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
        test = subprocess.run([swift, "test", "--package-path", package, "--scratch-path", SCRATCH, "--skip-build"],
                              capture_output=True, text=True, timeout=600, env=env, cwd=package)
        output = test.stdout + test.stderr
        assert test.returncode == 0, output[-4000:]
        assert "pageLoadsOverEdge() passed" in output and "resumesAfterADrop() passed" in output, output[-4000:]
