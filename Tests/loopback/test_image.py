"""The container image (scripts/image) and the Kubernetes manifests (deploy/kubernetes/).

The image is built from the binary under test (NETCOND_BIN: scripts/test's debug build, its Swift
runtime libraries copied beside it; a release build made with --static-swift-stdlib needs none),
tagged localhost/netcond-test:HASH, HASH from the binary and scripts/image. An image already there
under that tag (NETCOND_IMAGE_KEEP=1 keeps the one a run made) is reused; one this run made is
removed at the end. The build (mmdebstrap from the Debian mirror, then buildah) takes about 3
minutes on a 2-core machine, the tests that use the image about 1 more; NETCOND_IMAGE_TESTS=0
skips them.

What podman needs on this machine, found by trying:
- `default_ulimits = []` in a containers.conf of the test's own (CONTAINERS_CONF): rootful podman
  4.3 otherwise gives containers RLIMIT_NOFILE 1048576 and RLIMIT_NPROC 4194304, over this
  machine's hard limits, which runc cannot raise ("error setting rlimit type 7: operation not
  permitted"); and runc as the runtime (crun, podman's default, is not installed).
- Networks: the demo runs with `--network none` (it needs only the container's loopback). The pod
  uses podman's default bridge (netavark), a network namespace of the pod's own; its one published
  port is bound to 127.0.0.1 on the host (hostIP), and the control API is reached there.
"""
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import socket
import subprocess
import time

import pytest
import yaml

from conftest import NETCOND

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIDECAR = os.path.join(ROOT, "deploy", "kubernetes", "sidecar-pod.yaml")
INDEXED_JOB = os.path.join(ROOT, "deploy", "kubernetes", "indexed-job.yaml")
MANIFESTS = [SIDECAR, INDEXED_JOB]


def image_tests_missing():
    """Why the image tests cannot run here (None when they can)."""
    if os.environ.get("NETCOND_IMAGE_TESTS") == "0":
        return "NETCOND_IMAGE_TESTS=0"
    if os.geteuid() != 0:
        return "the image tests run podman and buildah as root"
    for tool in ("podman", "buildah", "mmdebstrap", "runc"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            return f"{tool} is not installed (apt-get install {tool})"
    return None


needs_image = pytest.mark.skipif(image_tests_missing() is not None, reason=str(image_tests_missing()))


@pytest.fixture(scope="module")
def podman_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("containers")
    conf = folder / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n')
    return dict(os.environ, CONTAINERS_CONF=str(conf))


def podman(env, *args, timeout=120):
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def image(podman_env):
    """The image's name: built from the binary under test, or the one already built from it."""
    digest = hashlib.sha256()
    for path in (NETCOND, os.path.join(ROOT, "scripts", "image")):
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    tag = "localhost/netcond-test:" + digest.hexdigest()[:16]
    made = False
    if podman(podman_env, "image", "exists", tag).returncode != 0:
        started = time.monotonic()
        built = subprocess.run(
            [os.path.join(ROOT, "scripts", "image"), "--binary", NETCOND, "--tag", tag],
            capture_output=True, text=True, timeout=1200, env=podman_env)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        made = True
        print(f"\nbuilt {tag} in {time.monotonic() - started:.0f} s: {built.stdout.strip().splitlines()[-1]}")
    yield tag
    if made and os.environ.get("NETCOND_IMAGE_KEEP") != "1":
        podman(podman_env, "rmi", tag)


@needs_image
def test_the_image_runs_as_netcond_with_what_the_packet_engine_needs(image, podman_env):
    inspected = json.loads(podman(podman_env, "image", "inspect", image).stdout)[0]
    config = inspected["Config"]
    assert config["User"] == "netcond"
    assert config["Entrypoint"] == ["netcond"]
    assert "CAP_NET_ADMIN" in config["Labels"]["io.netcond.engine.packet"]
    version = podman(podman_env, "run", "--rm", "--network", "none", image, "--version")
    assert version.returncode == 0 and version.stdout.startswith("0.1.0"), version.stderr
    tools = podman(podman_env, "run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c",
                   "id -u; command -v nft iptables ip curl; ls /usr/lib/x86_64-linux-gnu/libpcap.so.0.8; "
                   "ls /usr/share/netcond/Scenarios/resume-after-dropout.yaml")
    assert tools.returncode == 0, tools.stderr
    assert tools.stdout.split("\n")[0] == "10001"
    assert not podman(podman_env, "ps", "-a", "--filter", "ancestor=" + image, "-q").stdout.strip()


@needs_image
def test_the_demo_passes_in_the_image(image, podman_env):
    result = podman(podman_env, "run", "--rm", "--network", "none", image, "demo", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✗ resumes — cut at byte 40,960; the next request asked for the whole file again" in result.stdout
    assert "✓ resumes — cut at 40,960 → Range: bytes=40960-" in result.stdout
    assert "→ FAILED" in result.stdout and "→ passed" in result.stdout
    assert not podman(podman_env, "ps", "-a", "--filter", "ancestor=" + image, "-q").stdout.strip()


def free_host_port():
    """A loopback port free a moment ago, below the ephemeral range (where outgoing connections go)."""
    for _ in range(50):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32000")


def wait_until(predicate, seconds):
    """Polls `predicate` every second (each look runs podman) for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(1)
    return False


def app_times(env, pod):
    """The app's requests so far: (number, seconds) of each that got a 200."""
    logs = podman(env, "logs", pod + "-app").stdout
    return [(int(n), float(t)) for n, t in re.findall(r"app: request (\d+) took ([\d.]+)s, status 200", logs)]


@needs_image
def test_the_sidecar_delays_the_app_and_changes_conditions_from_outside(image, podman_env, tmp_path):
    pod = f"netcond-sidecar-{os.getpid()}"
    port = free_host_port()
    spec = yaml.safe_load(open(SIDECAR))
    spec["metadata"]["name"] = pod
    for container in spec["spec"]["containers"]:
        assert container["image"] == "localhost/netcond:latest"
        container["image"] = image
        for published in container.get("ports", []):
            assert published["hostIP"] == "127.0.0.1"
            published["hostPort"] = port
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(spec))
    control = f"http://127.0.0.1:{port}"
    played = podman(podman_env, "kube", "play", str(manifest))
    try:
        assert played.returncode == 0, played.stdout + played.stderr
        # satellite-geo: 340 ms each way; a request through the proxy crosses the link at least
        # twice (the request up, the answer down), the connection's set-up twice more.
        assert wait_until(lambda: len(app_times(podman_env, pod)) >= 2, 60), podman(podman_env, "logs", pod + "-app")
        before = app_times(podman_env, pod)
        assert all(t >= 0.68 for _, t in before), before
        status = subprocess.run([NETCOND, "ctl", "--control", control, "status"], capture_output=True, text=True,
                                timeout=30)
        assert status.returncode == 0 and status.stdout.startswith("satellite-geo"), status.stdout + status.stderr
        changed = subprocess.run([NETCOND, "ctl", "--control", control, "profile", "none"], capture_output=True,
                                 text=True, timeout=30)
        assert changed.returncode == 0, changed.stderr
        # The request under way during the change may have started under either profile.
        last = app_times(podman_env, pod)[-1][0]
        assert wait_until(lambda: len([n for n, _ in app_times(podman_env, pod) if n > last + 1]) >= 2, 60)
        after = [(n, t) for n, t in app_times(podman_env, pod) if n > last + 1]
        assert all(t < 0.3 for _, t in after), after
        status = subprocess.run([NETCOND, "ctl", "--control", control, "status"], capture_output=True, text=True,
                                timeout=30)
        assert status.stdout.startswith("none"), status.stdout
        print(f"\nthe app's requests: {before} under satellite-geo, {after} after `ctl profile none`")
    finally:
        down = podman(podman_env, "kube", "down", str(manifest))
        assert down.returncode == 0, down.stderr
        assert not podman(podman_env, "pod", "exists", pod).returncode == 0


@needs_image
def test_the_proxy_and_toxiproxy_lines_of_the_page_serve_on_a_port_published_on_loopback(image, podman_env):
    """Docs/containers.md's `podman run … proxy` and `… toxiproxy` lines, as written but for the image
    (this run's) and the host port (one free here: another job may hold 8080 or 8474), each started,
    asked through its published port and stopped (the demo's line: test_the_demo_passes_in_the_image)."""
    from doc_commands import blocks, without_comment
    lines = [c.text for b in blocks("Docs/containers.md") for c in b.commands
             if c.text.startswith("podman run --rm -p 127.0.0.1:")]
    assert len(lines) == 2, lines
    for line in lines:
        port, name = free_host_port(), f"netcond-docs-{os.getpid()}-{random.randrange(1 << 30)}"
        argv = shlex.split(without_comment(line).replace("netcond:latest", image))
        argv = [re.sub(r"^127\.0\.0\.1:\d+:", f"127.0.0.1:{port}:", a) for a in argv]
        server = subprocess.Popen([*argv[:2], "--name", name, *argv[2:]], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=podman_env)
        try:
            if " proxy " in line:
                ask = ["curl", "-sS", "-m", "10", "-x", f"http://127.0.0.1:{port}", "-o", "/dev/null", "-w",
                       "%{http_code} %{size_download}", "http://origin.netcond.test/bytes/1KB"]
                want = "200 1024"
            else:
                ask, want = ["curl", "-sS", "-m", "10", f"http://127.0.0.1:{port}/version"], "."
            answered = lambda: re.search(want, subprocess.run(ask, capture_output=True, text=True, timeout=20).stdout)
            assert wait_until(answered, 60), (line, subprocess.run(ask, capture_output=True, text=True).stderr)
        finally:
            podman(podman_env, "stop", "-t", "10", name)
            output = server.communicate(timeout=60)[0]
        assert server.returncode in (0, 130, 143), (line, server.returncode, output)
        assert "0.0.0.0:8080" in output or "8474" in output, output


@needs_image
def test_the_indexed_jobs_parts_and_merge_run_in_the_image(image, podman_env, tmp_path):
    """The Job's own command lines, run as Kubernetes would run its pods (JOB_COMPLETION_INDEX 0..N-1,
    one volume at /reports), over two quick scenarios mounted in place of the shipped ones."""
    documents = list(yaml.safe_load_all(open(INDEXED_JOB)))
    shards, merge = documents[1]["spec"], documents[2]["spec"]
    scenarios, reports = tmp_path / "scenarios", tmp_path / "reports"
    scenarios.mkdir()
    reports.mkdir()
    reports.chmod(0o777)  # the pods' user (uid 10001) writes there; Kubernetes' fsGroup does this
    for name in ("revalidate-unchanged.yaml", "cdn-refuses-fallback.yaml"):
        shutil.copy(os.path.join(ROOT, "Scenarios", name), scenarios / name)

    def run_container(container, *env):
        mounts = ["-v", f"{scenarios}:/usr/share/netcond/Scenarios:ro", "-v", f"{reports}:/reports"]
        given = [f"{e['name']}={e['value']}" for e in container.get("env", [])] + list(env)
        environment = [a for pair in (("-e", e) for e in given) for a in pair]
        return podman(podman_env, "run", "--rm", "--network", "none", *mounts, *environment,
                      "--entrypoint", container["command"][0], image, *container["command"][1:], *container["args"],
                      timeout=300)

    for index in range(shards["completions"]):
        part = run_container(shards["template"]["spec"]["containers"][0], f"JOB_COMPLETION_INDEX={index}")
        assert part.returncode == 0, part.stdout + part.stderr
        assert f"part {index + 1}/{shards['completions']} holds" in part.stderr
    assert sorted(os.listdir(reports)) == sorted(
        f"shard-{i}.{kind}" for i in range(shards["completions"]) for kind in ("json", "xml"))
    waited = run_container(merge["template"]["spec"]["initContainers"][0])  # every part is there: at once
    assert waited.returncode == 0 and not waited.stderr, waited.stderr
    merged = run_container(merge["template"]["spec"]["containers"][0])
    assert merged.returncode == 0, merged.stdout + merged.stderr
    report = json.loads((reports / "report.json").read_text())
    assert sorted(s["name"] for s in report["scenarios"]) == ["cdn-refuses-fallback", "revalidate-unchanged"]
    assert (reports / "report.html").stat().st_size > 0


def test_the_manifests_parse_and_agree_on_the_number_of_parts():
    pod = yaml.safe_load(open(SIDECAR))
    assert pod["kind"] == "Pod" and [c["name"] for c in pod["spec"]["containers"]] == ["netcond", "app"]
    assert pod["spec"]["containers"][0]["args"][:2] == ["proxy", "satellite-geo"]
    documents = list(yaml.safe_load_all(open(INDEXED_JOB)))
    assert [d["kind"] for d in documents] == ["PersistentVolumeClaim", "Job", "Job"]
    shards, merge = documents[1]["spec"], documents[2]["spec"]
    assert shards["completionMode"] == "Indexed" and shards["completions"] == shards["parallelism"]
    parts = shards["completions"]
    command = shards["template"]["spec"]["containers"][0]["args"][0]
    assert f'--shard "$((i + 1))/{parts}"' in command and "--json" in command and "--junit" in command
    wait = merge["template"]["spec"]["initContainers"][0]
    assert {"name": "PARTS", "value": str(parts)} in wait["env"]
    assert "netcond report merge /reports/shard-*.json" in merge["template"]["spec"]["containers"][0]["args"][0]


def test_the_containerfile_and_the_mirror_build_install_the_same_packages():
    script = open(os.path.join(ROOT, "scripts", "image")).read()
    packages = sorted(re.search(r'^packages="([^"]+)"', script, re.M).group(1).split(","))
    containerfile = open(os.path.join(ROOT, "Containerfile")).read()
    installed = re.search(r"--no-install-recommends \\\n\s+([^\\]+)\\", containerfile).group(1).split()
    assert sorted(installed) == packages
    assert "useradd --uid 10001" in script and "useradd --uid 10001" in containerfile
    assert 'ENTRYPOINT ["netcond"]' in containerfile and "--entrypoint '[\"netcond\"]'" in script


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed (apt-get install kubernetes-client)")
def test_kubectl_reads_the_manifests_offline():
    # `kubectl apply --dry-run=client` asks a server for its API groups first (by default
    # localhost:8080, where another job's proxy may listen); `annotate --local` reads the objects
    # with kubectl's own decoder and needs none. The unreachable server is for safety.
    for manifest in MANIFESTS:
        result = subprocess.run(
            ["kubectl", "annotate", "--local", "-f", manifest, "-o", "name", "netcond/checked=yes",
             "--server", "http://127.0.0.1:1"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        expected = {SIDECAR: "pod/netcond-sidecar\n",
                    INDEXED_JOB: "persistentvolumeclaim/netcond-reports\njob.batch/netcond-shards\n"
                                 "job.batch/netcond-report\n"}[manifest]
        assert result.stdout == expected


def test_the_manifests_validate_against_kubernetes_schemas(tmp_path):
    """Offline schema validation (PyPI's kubernetes-validate bundles Kubernetes' OpenAPI schemas),
    strict: a misspelt field fails. 1.29: the first with backoffLimitPerIndex on by default."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    del kubernetes_validate
    for version in ("1.29.0", "1.33.0"):
        result = subprocess.run(["kubernetes-validate", "--strict", "--quiet", "-k", version, *MANIFESTS],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
    text = open(INDEXED_JOB).read().replace("completionMode:", "completionMod:")
    bad = tmp_path / "job.yaml"
    bad.write_text(text)
    result = subprocess.run(["kubernetes-validate", "--strict", "--quiet", "-k", "1.29.0", str(bad)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "'completionMod' was unexpected" in result.stdout + result.stderr
