"""Bench item 14: what a Swift developer's first build costs.

A fresh package, as a user makes one (a library target, a test target), is built cold
(`swift build --build-tests`, a new scratch folder) three ways, one after the other on this machine:
its test target depending on swift-nio alone (NIOCore, NIOPosix, NIOHTTP1: the floor any
SwiftNIO-based test helper pays), on NetcondTesting from this tree by path, and, with
NETCOND_COLD_BEFORE=REV, on NetcondTesting as it was at git revision REV (an export of that tree),
for a before/after. Each row gives the wall time, the build steps SwiftPM counted and the size of
the scratch folder. Packages resolve through SwiftPM's own cache, as a user's second package would;
only the build is cold.

It takes minutes, so it runs only when asked (`scripts/bench --only 14`). Target: NetcondTesting's
cold build under a third of the 20 minutes it took before the TLS library left it (400 s).
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TARGET_SECONDS = 400

LIBRARY = """import Foundation

/// The user's own code: a download with a retry, the kind of client NetcondTesting is for.
public func fetch(_ url: URL, attempts: Int) async throws -> Data {
    var last: Error?
    for _ in 0..<max(attempts, 1) {
        do { return try Data(contentsOf: url) } catch { last = error }
    }
    throw last!
}
"""

NIO_TEST = """import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
@testable import Downloader

@Test func aBufferHoldsItsBytes() {
    var buffer = ByteBuffer()
    buffer.writeString("netcond")
    #expect(buffer.readableBytes == 7)
    #expect(HTTPMethod.GET.rawValue == "GET")
    _ = MultiThreadedEventLoopGroup.singleton
}
"""

NETCOND_TEST = """import Foundation
import NetcondTesting
import Testing
@testable import Downloader

@Test(.network(.edge)) func aDownloadUnderEdge() async throws {
    let network = try #require(Netcond.current)
    let data = try await fetch(network.originURL.appendingPathComponent("bytes/10"), attempts: 3)
    #expect(data.count == 10)
}
"""


def manifest(dependency, product):
    return f"""// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Downloader",
    platforms: [.macOS(.v14)],
    dependencies: [{dependency}],
    targets: [
        .target(name: "Downloader"),
        .testTarget(name: "DownloaderTests", dependencies: ["Downloader", {product}]),
    ]
)
"""


def make_package(folder, dependency, product, test):
    os.makedirs(os.path.join(folder, "Sources", "Downloader"))
    os.makedirs(os.path.join(folder, "Tests", "DownloaderTests"))
    with open(os.path.join(folder, "Package.swift"), "w") as f:
        f.write(manifest(dependency, product))
    with open(os.path.join(folder, "Sources", "Downloader", "Downloader.swift"), "w") as f:
        f.write(LIBRARY)
    with open(os.path.join(folder, "Tests", "DownloaderTests", "DownloaderTests.swift"), "w") as f:
        f.write(test)


def folder_size(path):
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total


def cold_build(h, folder, name, env):
    """(seconds, steps, bytes) of a cold `swift build --build-tests` of the package in `folder`."""
    swift = shutil.which("swift")
    resolve = subprocess.run([swift, "package", "--package-path", folder, "resolve"],
                             capture_output=True, text=True, timeout=900, env=env)
    if resolve.returncode != 0:
        raise RuntimeError(f"{name}: swift package resolve failed: {(resolve.stdout + resolve.stderr)[-1500:]}")
    scratch = os.path.join(folder, ".build")
    # Resolution leaves the checkouts in .build; the build itself starts from nothing compiled.
    for entry in os.listdir(scratch):
        if entry not in ("checkouts", "repositories", "workspace-state.json"):
            shutil.rmtree(os.path.join(scratch, entry), ignore_errors=True)
    started = time.monotonic()
    build = subprocess.run([swift, "build", "--package-path", folder, "--build-tests"],
                           capture_output=True, text=True, timeout=3600, env=env)
    seconds = time.monotonic() - started
    output = build.stdout + build.stderr
    with open(os.path.join(h.tmp, "logs", f"cold-build-{name}.log"), "w") as f:
        f.write(output)
    if build.returncode != 0:
        raise RuntimeError(f"{name}: the build failed: {output[-1500:]}")
    steps = max((int(m.group(1)) for m in re.finditer(r"\[\d+/(\d+)\]", output)), default=0)
    return seconds, steps, folder_size(scratch)


def export_revision(revision, destination):
    """The tree of `revision` (this repository's) in `destination`."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", revision],
                             capture_output=True, timeout=300)
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {revision}: {archive.stderr.decode()[-500:]}")
    os.makedirs(destination)
    subprocess.run(["tar", "-x", "-C", destination], input=archive.stdout, check=True, timeout=300)


def item_cold_build(h, t):
    name = "14. cold build"
    if not h.only or "14" not in h.only:
        t.add(name, "not run (takes minutes: scripts/bench --only 14 [--no-build])", "-", "SKIP")
        return
    if shutil.which("swift") is None:
        t.add(name, "no swift on PATH", "-", "SKIP")
        return
    work = tempfile.mkdtemp(prefix="cold-build.", dir=h.tmp)
    # SwiftPM's own lock files and temporary folders go in TMPDIR: here, removed with the rest.
    scratch_tmp = os.path.join(work, "tmp")
    os.makedirs(scratch_tmp)
    env = dict(os.environ, TMPDIR=scratch_tmp)
    try:
        nio = os.path.join(work, "nio")
        make_package(nio, '.package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2")',
                     '.product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"), '
                     '.product(name: "NIOHTTP1", package: "swift-nio")', NIO_TEST)
        runs = [("swift-nio alone", nio)]
        here = os.path.join(work, "netcond")
        make_package(here, f'.package(name: "netcond", path: "{ROOT}")',
                     '.product(name: "NetcondTesting", package: "netcond")', NETCOND_TEST)
        runs.append(("NetcondTesting (this tree)", here))
        before = os.environ.get("NETCOND_COLD_BEFORE")
        if before:
            tree = os.path.join(work, "before-tree")
            export_revision(before, tree)
            old = os.path.join(work, "before")
            make_package(old, f'.package(name: "netcond", path: "{tree}")',
                         '.product(name: "NetcondTesting", package: "netcond")', NETCOND_TEST)
            runs.append((f"NetcondTesting at {before}", old))
        floor = None
        for label, folder in runs:
            seconds, steps, size = cold_build(h, folder, label.split(" ")[0] + ("-before" if "at " in label else ""), env)
            measured = f"{seconds:.0f} s, {steps} steps, .build {size / 1e6:.0f} MB"
            if floor is None:
                floor = seconds
                t.add(f"{name}: {label}", measured, "(the floor)", "INFO")
            elif label.endswith("(this tree)"):
                measured += f"; {seconds / floor:.1f}× swift-nio alone"
                t.add(f"{name}: {label}", measured, f"<= {TARGET_SECONDS} s", "PASS" if seconds <= TARGET_SECONDS else "FAIL")
            else:
                t.add(f"{name}: {label}", measured + f"; {seconds / floor:.1f}× swift-nio alone", "(before)", "INFO")
            shutil.rmtree(os.path.join(folder, ".build"), ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
