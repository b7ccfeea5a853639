"""Examples/ResumingClient, a package that depends on netcond by path and tests its client with
NetcondTesting's trait: built and its tests run, as a user of the library would."""
import glob
import json
import os
import shutil
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "Examples", "ResumingClient")
SCRATCH = os.path.join(ROOT, ".build-examples")  # kept between runs (ignored by git), as .build is


# What a TLS library builds (two copies of BoringSSL: most of a cold build); NetcondTesting must not need it.
TLS_PRODUCTS = {"NIOSSL", "X509", "Crypto", "_CryptoExtras", "SwiftASN1"}
TLS_BUILD_FOLDERS = ("CNIOBoringSSL.build", "CNIOBoringSSLShims.build", "CCryptoBoringSSL.build",
                     "CCryptoBoringSSLShims.build", "NIOSSL.build", "Crypto.build", "X509.build", "NetcondTLS.build")


def test_netcond_testing_depends_on_no_tls_library():
    swift = shutil.which("swift")
    if swift is None:
        pytest.skip("no swift toolchain on PATH")
    with tempfile.TemporaryDirectory(prefix="netcond-describe-swiftpm-") as scratch_tmp:
        described = subprocess.run([swift, "package", "--package-path", ROOT, "describe", "--type", "json"],
                                   capture_output=True, text=True, timeout=600, env=dict(os.environ, TMPDIR=scratch_tmp))
    assert described.returncode == 0, described.stderr[-4000:]
    targets = {t["name"]: t for t in json.loads(described.stdout)["targets"]}
    seen, products, stack = set(), set(), ["NetcondTesting"]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        products.update(targets[name].get("product_dependencies", []))
        stack.extend(targets[name].get("target_dependencies", []))
    assert not products & TLS_PRODUCTS, f"NetcondTesting reaches {sorted(products & TLS_PRODUCTS)} through {sorted(seen)}"
    assert "NetcondTLS" not in seen
    # The command does have TLS (the origin's HTTPS, the portal's wrong certificate).
    assert "NetcondTLS" in targets["netcond"]["target_dependencies"]


def test_the_example_package_builds_and_its_conditioned_test_passes():
    swift = shutil.which("swift")
    if swift is None:
        pytest.skip("no swift toolchain on PATH")
    # The example's build must not compile a TLS library: whatever an earlier build left of one goes
    # first, and must not come back.
    for triple in glob.glob(os.path.join(SCRATCH, "*-*-*")):
        for folder in TLS_BUILD_FOLDERS:
            shutil.rmtree(os.path.join(triple, "debug", folder), ignore_errors=True)
    # SwiftPM's lock files and TemporaryDirectory.* folders go in a folder of the test's, removed after.
    scratch_tmp = tempfile.mkdtemp(prefix="netcond-example-swiftpm-")
    try:
        run_example(swift, scratch_tmp)
    finally:
        shutil.rmtree(scratch_tmp, ignore_errors=True)


def run_example(swift, scratch_tmp):
    env = dict(os.environ, TMPDIR=scratch_tmp)
    build = subprocess.run([swift, "build", "--package-path", EXAMPLE, "--scratch-path", SCRATCH, "--build-tests"],
                           capture_output=True, text=True, timeout=2400, env=env)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    # SwiftPM writes an output file map for every target it knows; what was compiled left objects.
    built = [os.path.relpath(path, SCRATCH) for folder in TLS_BUILD_FOLDERS
             for path in glob.glob(os.path.join(SCRATCH, "*-*-*", "debug", folder, "**", "*.o"), recursive=True)]
    assert not built, f"the example's build compiled a TLS library: {built[:5]} ({len(built)} objects)"
    test = subprocess.run([swift, "test", "--package-path", EXAMPLE, "--scratch-path", SCRATCH, "--skip-build"],
                          capture_output=True, text=True, timeout=600, env=env)
    output = test.stdout + test.stderr
    assert test.returncode == 0, output[-4000:]
    assert "resumesAfterTheConnectionIsCut() passed" in output, output[-4000:]
    # The test printed the link's summary: the cut happened on the emulated link.
    assert "ResumeTests: lte:" in output and "cut by the link" in output, output[-4000:]
