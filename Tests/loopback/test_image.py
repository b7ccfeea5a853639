"""The container image (scripts/image) and the Kubernetes manifests (deploy/kubernetes/).

The image is built from the binary under test (NETCOND_BIN: scripts/test's debug build, its Swift
runtime libraries copied beside it; a release build made with --static-swift-stdlib needs none),
tagged localhost/netcond-test:HASH, HASH from the binary and scripts/image. An image already there
under that tag (NETCOND_IMAGE_KEEP=1 keeps the one a run made) is reused; one this run made is
removed at the end. The build (mmdebstrap from the Debian mirror, then buildah) takes about 3
minutes on a 2-core machine, the tests that use the image about 1 more, the Containerfile's route
(a bookworm-slim made from the mirror, then the build) about 3 more, the packet engine's two runs
in the image 40 s; NETCOND_IMAGE_TESTS=0 skips them.

What podman needs on this machine, found by trying:
- `default_ulimits = []` in a containers.conf of the test's own (CONTAINERS_CONF): rootful podman
  4.3 otherwise gives containers RLIMIT_NOFILE 1048576 and RLIMIT_NPROC 4194304, over this
  machine's hard limits, which runc cannot raise ("error setting rlimit type 7: operation not
  permitted"); and runc as the runtime (crun, podman's default, is not installed).
- Networks: the demo runs with `--network none` (it needs only the container's loopback). The pod
  uses podman's default bridge (netavark), a network namespace of the pod's own; its one published
  port is bound to 127.0.0.1 on the host (hostIP), and the control API is reached there.
"""
import fcntl
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
import urllib.request

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


# ---- The Containerfile's route, without a registry -------------------------------------------------
#
# `FROM debian:bookworm-slim` is met by a base image made here the way debuerreotype makes the
# registry's (mmdebstrap --variant=minbase from this machine's Debian mirror, without manuals,
# documentation or translations, with the docker-* apt settings that drop the downloaded packages),
# imported as docker.io/library/debian:bookworm-slim into a containers storage of the test's own
# (CONTAINERS_STORAGE_CONF: graph root and run root in a temporary folder, removed at the end, so
# a real debian:bookworm-slim in the machine's storage is never touched). podman's tmp_dir
# (/run/libpod) stays the machine's: a tmp_dir of its own would make podman "refresh" as after a
# reboot, which frees every lock in the shared lock memory, other podman users' too. The build
# (`scripts/image --containerfile`, its real build context) runs with `--pull=never` and the
# host's network (`--network=host`): its `apt-get update` reaches the mirror as this machine does,
# and no bridge or firewall rule is made for it.

SLIM_APT_SETTINGS = {
    # debuerreotype's, as in the registry's debian images
    "etc/apt/apt.conf.d/docker-clean":
        'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb '
        '/var/cache/apt/*.bin || true"; };\nDir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n',
    "etc/apt/apt.conf.d/docker-autoremove-suggests": 'Apt::AutoRemove::SuggestsImportant "false";\n',
    "etc/apt/apt.conf.d/docker-gzip-indexes": 'Acquire::GzipIndexes "true";\n',
    "etc/apt/apt.conf.d/docker-no-languages": 'Acquire::Languages "none";\n',
    "etc/dpkg/dpkg.cfg.d/docker-apt-speedup": "force-unsafe-io\n",
}


def debian_mirror():
    """The mirror scripts/image uses: the first .../debian URI of /etc/apt/sources.list*."""
    texts = []
    for folder, names in (("/etc/apt", ["sources.list"]), ("/etc/apt/sources.list.d", None)):
        try:
            names = names or sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if name.endswith((".list", ".sources")):
                try:
                    texts.append(open(os.path.join(folder, name)).read())
                except OSError:
                    pass
    found = re.search(r"(?:https?|file)://\S*/debian/?(?=\s|$)", "\n".join(texts), re.M)
    return found.group(0).rstrip("/") if found else "http://deb.debian.org/debian"


def mirror_unreachable(mirror):
    """Why the build's apt-get cannot reach the mirror (None when it can): the build shares this
    machine's network (--network=host), so it reaches what this machine reaches."""
    url = mirror + "/dists/bookworm/Release"
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:
            answer.read(64)
    except Exception as error:  # noqa: BLE001 - any failure is the reason to skip
        return f"the Debian mirror is unreachable from this machine, so from the build's apt-get too ({url}: {error})"
    return None


def own_mounts_under(folder):
    """Mount points under `folder` (overlay layers a killed build left), deepest first."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == folder or point.startswith(folder + "/"):
                points.append(point)
    return sorted(points, key=len, reverse=True)


@pytest.fixture(scope="module")
def own_storage(podman_env, tmp_path_factory):
    """podman/buildah's environment with a containers storage of this test's own, removed at the end."""
    folder = str(tmp_path_factory.mktemp("storage"))
    conf = os.path.join(folder, "storage.conf")
    with open(conf, "w") as f:
        f.write(f'[storage]\ndriver = "overlay"\ngraphroot = "{folder}/root"\nrunroot = "{folder}/run"\n')
    env = dict(podman_env, CONTAINERS_STORAGE_CONF=conf)
    try:
        yield env
    finally:
        # Everything in this storage is this test's: its containers, then its images.
        root = podman(env, "info", "--format", "{{.Store.GraphRoot}}").stdout.strip()
        if root == folder + "/root":
            podman(env, "rm", "--all", "--force", timeout=120)
            subprocess.run(["buildah", "rm", "--all"], capture_output=True, timeout=120, env=env)
            podman(env, "rmi", "--all", "--force", timeout=300)
        for point in own_mounts_under(folder):
            subprocess.run(["umount", "--lazy", point], capture_output=True, timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
        assert not os.path.exists(folder)


def make_slim_base(env, folder, mirror):
    """docker.io/library/debian:bookworm-slim in `env`'s storage, from the mirror."""
    security = mirror.rsplit("/debian", 1)[0] + "/debian-security"
    tarball = os.path.join(folder, "bookworm-slim.tar")
    hooks = [f"--customize-hook=printf '%s' '{text}' > \"$1\"/{path}" for path, text in SLIM_APT_SETTINGS.items()]
    made = subprocess.run(
        ["mmdebstrap", "--variant=minbase",
         "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
         "--dpkgopt=path-include=/usr/share/doc/*/copyright", "--dpkgopt=path-exclude=/usr/share/locale/*",
         "--dpkgopt=path-exclude=/usr/share/info/*", *hooks,
         '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin',
         "bookworm", tarball,
         f"deb {mirror} bookworm main", f"deb {mirror} bookworm-updates main",
         f"deb {security} bookworm-security main"],
        capture_output=True, text=True, timeout=900, env=env)
    assert made.returncode == 0, made.stderr[-3000:]
    imported = podman(env, "import", "--change", 'CMD ["bash"]', tarball, "docker.io/library/debian:bookworm-slim",
                      timeout=300)
    os.unlink(tarball)
    assert imported.returncode == 0, imported.stderr


IMAGE_FACTS = (
    "id netcond; getent passwd netcond; ls -l /usr/local/bin/netcond | sed 's/.* -> //'; "
    "cd /usr/local/lib/netcond && sha256sum * | sort; cd /usr/share/netcond/Scenarios && find . -type f | sort "
    "| xargs sha256sum; echo packages:; dpkg-query -W -f '${Package} ${Version}\\n' | sort"
)


def image_facts(env, image):
    """What matters of an image: its configuration and, from inside, its users, files and packages."""
    config = json.loads(podman(env, "image", "inspect", image).stdout)[0]["Config"]
    inside = podman(env, "run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c", IMAGE_FACTS)
    assert inside.returncode == 0, inside.stderr
    files, packages = inside.stdout.split("packages:\n")
    kept = {k: config.get(k) for k in ("User", "Entrypoint", "Cmd", "WorkingDir")}
    # Every label but the commit: the mirror route's image may be one an earlier commit built from
    # the same binary and scripts/image (NETCOND_IMAGE_KEEP), named by their hash.
    kept["Labels"] = {k: v for k, v in config["Labels"].items() if k != "org.opencontainers.image.revision"}
    return kept, sorted(config.get("Env") or []), files, packages.splitlines()


@needs_image
def test_the_containerfile_gives_the_same_image_from_a_local_bookworm_slim(image, podman_env, own_storage, tmp_path):
    mirror = debian_mirror()
    unreachable = mirror_unreachable(mirror)
    if unreachable:
        pytest.skip(unreachable)
    started = time.monotonic()
    make_slim_base(own_storage, str(tmp_path), mirror)
    based = time.monotonic()
    # The same name as the mirror route's image (the other storage): the labels name it.
    built = subprocess.run(
        [os.path.join(ROOT, "scripts", "image"), "--containerfile", "--binary", NETCOND, "--tag", image,
         "--build-option=--pull=never", "--build-option=--network=host"],
        capture_output=True, text=True, timeout=1200, env=own_storage)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    print(f"\nbookworm-slim from {mirror} in {based - started:.0f} s; the Containerfile's image in "
          f"{time.monotonic() - based:.0f} s: {built.stdout.strip().splitlines()[-1]}")

    demo = podman(own_storage, "run", "--rm", "--network", "none", image, "demo", timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "→ FAILED" in demo.stdout and "→ passed" in demo.stdout

    config, env, files, packages = image_facts(own_storage, image)
    mirror_config, mirror_env, mirror_files, mirror_packages = image_facts(podman_env, image)
    assert config == mirror_config
    assert set(mirror_env) <= set(env)  # the base image's own PATH is the same as the one set
    assert dict(e.split("=", 1) for e in env) == dict(e.split("=", 1) for e in mirror_env)
    assert files == mirror_files
    assert packages == mirror_packages, (
        "packages only the Containerfile's image has: " + ", ".join(sorted(set(packages) - set(mirror_packages)))
        + "; only the mirror route's: " + ", ".join(sorted(set(mirror_packages) - set(packages))))
    # Nothing apt downloaded stays in the image (the base's docker-clean; the Containerfile removes the lists).
    leftovers = podman(own_storage, "run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "sh", image,
                       "-c", "ls /var/lib/apt/lists /var/cache/apt/archives | grep -v -e '^/' -e '^$' -e lock -e partial")
    assert not leftovers.stdout.strip(), leftovers.stdout
    sizes = [podman(e, "image", "inspect", "--format", "{{.Size}}", image).stdout.strip()
             for e in (own_storage, podman_env)]
    print(f"sizes: Containerfile {int(sizes[0]) / 1e6:.0f} MB, mirror route {int(sizes[1]) / 1e6:.0f} MB; "
          f"{len(packages)} packages each")
    assert not podman(own_storage, "ps", "-a", "-q").stdout.strip()


# ---- The packet engine in the image -------------------------------------------------------------
#
# It needs root in the container, the capabilities of its firewall rules, raw sockets and cgroup BPF
# programs, and a writable cgroup2 hierarchy mounted at /sys/fs/cgroup or /sys/fs/cgroup/unified
# (PacketCage: the command's cgroup is a child of that hierarchy's root, matched by nft with
# `socket cgroupv2 level 1`). This machine's podman (4.3, runc) runs with cgroup v1 on a hybrid host
# (cgroup2 at /sys/fs/cgroup/unified, no controllers) and mounts only the v1 hierarchies in a
# container, even with --privileged: without more, the packet engine refuses ("this system has no
# cgroup2 hierarchy mounted"). Two ways that work, found by trying (Docs/containers.md):
#   1. the host's cgroup2 bind-mounted, with capabilities and no --privileged:
#      --user 0 --cap-add NET_ADMIN,NET_RAW,BPF,SYS_ADMIN -v /sys/fs/cgroup/unified:/sys/fs/cgroup/unified
#      (the run's cgroup is made at the host hierarchy's root, and removed by the run);
#   2. a cgroup namespace of the container's own and the cgroup2 hierarchy mounted inside it, as a
#      cgroup v2 host gives: --privileged --cgroupns=private --user 0, and `mount -t cgroup2` before
#      netcond (the run's cgroup is under the container's, removed with it).
# Without CAP_SYS_ADMIN the command cannot be started in the mount namespace of its own where
# netcond's /etc/hosts names the built-in origin ("cannot start …: Operation not permitted"); as the image's user (uid 10001), even with these capabilities, the cgroup cannot be
# made ("Permission denied").

PACKET_CAPS = "NET_ADMIN,NET_RAW,BPF,SYS_ADMIN"


def host_cgroup2():
    """Where this machine mounts its cgroup2 hierarchy (None: nowhere)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return fields[4]
    return None


def packet_in_image_missing():
    if image_tests_missing():
        return image_tests_missing()
    if not host_cgroup2():
        return "this machine mounts no cgroup2 hierarchy: the packet engine cannot run, in a container or not"
    return None


needs_packet_in_image = pytest.mark.skipif(packet_in_image_missing() is not None, reason=str(packet_in_image_missing()))


def assert_packet_demo(result):
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✗ resumes — cut at byte 40,960; the next request asked for the whole file again" in result.stdout
    assert "✓ resumes — cut at 40,960 → Range: bytes=40960-" in result.stdout
    # Both clients' packets crossed the link (EDGE: 400/440 ms one way): the packet engine's summaries.
    crossed = re.findall(r"edge \(packet engine\): ([\d.]+) s, up [\d.]+ K?B in (\d+) packets", result.stdout)
    assert len(crossed) == 2 and all(float(s) > 4 and int(n) > 10 for s, n in crossed), result.stdout


def unlocked(directory):
    """Whether no live netcond run holds the cgroup `directory` (each holds its flock for its life)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@needs_packet_in_image
def test_the_packet_engine_runs_in_the_image_with_a_cgroup2_namespace_of_its_own(image, podman_env, tmp_path):
    root = host_cgroup2()
    cidfile = tmp_path / "cid"
    if root == "/sys/fs/cgroup":  # a cgroup v2 host: podman gives the container its cgroup2, writable when privileged
        command = ["--entrypoint", "netcond", image, "demo", "--engine", "packet"]
    else:
        command = ["--entrypoint", "sh", image, "-c", "mkdir -p /sys/fs/cgroup/unified && "
                   "mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified && exec netcond demo --engine packet"]
    result = podman(podman_env, "run", "--rm", "--network", "none", "--cidfile", str(cidfile), "--privileged",
                    "--cgroupns=private", "--user", "0", *command, timeout=300)
    cid = cidfile.read_text().strip() if cidfile.exists() else ""
    if cid:
        podman(podman_env, "rm", "--force", "--ignore", cid)
    assert_packet_demo(result)
    # The run's cgroup was the container's child: the container's own cgroup (removed by podman only
    # when empty) is gone, so the run removed its cgroup.
    assert cid
    left = subprocess.run(["find", root, "-maxdepth", "3", "-name", f"*{cid}*"], capture_output=True, text=True,
                          timeout=60).stdout.split()
    assert not left, left


@needs_packet_in_image
def test_the_packet_engine_runs_in_the_image_with_capabilities_and_the_hosts_cgroup2(image, podman_env):
    root = host_cgroup2()
    if root != "/sys/fs/cgroup/unified":
        pytest.skip(f"this recipe is for hybrid cgroup hosts (cgroup2 at /sys/fs/cgroup/unified); here it is at {root}")

    def runs():
        return {d for d in os.listdir(root) if d.startswith("netcond-")}

    before = runs()
    result = podman(podman_env, "run", "--rm", "--network", "none", "--user", "0", "--cap-add", PACKET_CAPS,
                    "-v", f"{root}:{root}", image, "demo", "--engine", "packet", timeout=300)
    assert_packet_demo(result)
    # Its cgroups were made at the host hierarchy's root: none is left. (Another netcond's live run
    # may have made one meanwhile: it holds its lock.)
    left = [d for d in runs() - before if unlocked(os.path.join(root, d))]
    assert not left, left


def docs_yaml_blocks():
    """The YAML blocks of Docs/containers.md."""
    text = open(os.path.join(ROOT, "Docs", "containers.md"), encoding="utf-8").read()
    return [yaml.safe_load(block) for block in re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)]


def test_the_docs_packet_engine_security_contexts_validate():
    blocks = docs_yaml_blocks()
    v2 = [b for b in blocks if "securityContext" in b]
    hybrid = [b for b in blocks if "volumes" in b]
    assert len(v2) == 1 and len(hybrid) == 1
    assert v2[0]["securityContext"] == {"privileged": True, "runAsUser": 0, "runAsNonRoot": False}
    context = hybrid[0]["containers"][0]["securityContext"]
    assert context["capabilities"]["add"] == PACKET_CAPS.split(",") and context["runAsUser"] == 0
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    del kubernetes_validate
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "v2"},
             "spec": {"containers": [{"name": "netcond", "image": "netcond", **v2[0]}]}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hybrid"}, "spec": hybrid[0]}]
    result = subprocess.run(["kubernetes-validate", "--strict", "--quiet", "-k", "1.29.0", "-"],
                            input=yaml.safe_dump_all(pods), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_packet_in_image
def test_the_docs_hybrid_node_pod_runs_the_packet_engine(image, podman_env, tmp_path):
    """Docs/containers.md's pod for hybrid nodes, as given (its command: `netcond run --engine packet
    --user netcond edge -- curl …`), played by podman without a network (the origin is built in)."""
    if host_cgroup2() != "/sys/fs/cgroup/unified":
        pytest.skip(f"the pod is for hybrid cgroup hosts (cgroup2 at /sys/fs/cgroup/unified); here it is at {host_cgroup2()}")
    spec = next(b for b in docs_yaml_blocks() if "volumes" in b)
    name = f"netcond-packet-{os.getpid()}"
    spec["restartPolicy"] = "Never"
    spec["containers"][0]["image"] = image
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}))
    container = name + "-" + spec["containers"][0]["name"]
    played = podman(podman_env, "kube", "play", "--network", "none", str(manifest))
    try:
        assert played.returncode == 0, played.stdout + played.stderr
        assert wait_until(lambda: podman(podman_env, "inspect", "--format", "{{.State.Status}}", container)
                          .stdout.strip() == "exited", 120)
        code = podman(podman_env, "inspect", "--format", "{{.State.ExitCode}}", container).stdout.strip()
        logs = podman(podman_env, "logs", container)
        assert code == "0", logs.stdout + logs.stderr
        assert "/delay/{duration}" in logs.stdout  # the built-in origin's index, through the link
        assert re.search(r"edge \(packet engine\): [\d.]+ s, up \d+ B in \d+ packets", logs.stderr), logs.stderr
    finally:
        down = podman(podman_env, "kube", "down", str(manifest))
        assert down.returncode == 0, down.stderr
        assert podman(podman_env, "pod", "exists", name).returncode != 0
