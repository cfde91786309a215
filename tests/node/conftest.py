"""Tests on a real node: `hack/cluster.sh up --node` starts etcd, kube-apiserver, the controller
manager, the scheduler, containerd, the kubelet, kube-proxy and CoreDNS for the session, and always
stops them. Nothing plays the kubelet's part here: the chart's Deployment runs on the node behind
its Service, and Jobs run the real PyTorch DataLoader in the /dev/shm the kubelet mounts.

Images (nothing can be pulled): SHMGUARD_IMAGE (the Dockerfile's, built by hack/test.sh's image
stage; built here when missing) and the training image from hack/node/training.Dockerfile, which
Docker's layer cache keys by its inputs. The training image is also tagged with the PyTorch image
name README's `kubectl run shm-check` uses, so that command runs as written."""
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

_CLUSTER = Path(__file__).resolve().parents[1] / "cluster"
sys.path.insert(0, str(_CLUSTER))
sys.path.insert(0, str(_CLUSTER.parent))  # readme_blocks
_spec = importlib.util.spec_from_file_location("cluster_conftest", _CLUSTER / "conftest.py")
cluster_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cluster_conftest)
Cluster, HACK, SRC, BIN = cluster_conftest.Cluster, cluster_conftest.HACK, cluster_conftest.SRC, cluster_conftest.BIN
# What tests/e2e modules imported here (test_pytorch: to_bytes) take from `conftest`.
Server, decode_patch, gen_certs, review = (cluster_conftest.Server, cluster_conftest.decode_patch,
                                          cluster_conftest.gen_certs, cluster_conftest.review)

IMAGE = os.environ.get("SHMGUARD_IMAGE") or "shmguard:test"
TRAINING_IMAGE = "shmguard-training:test"
README_PYTORCH_IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
NAMESPACE = "shmguard"  # README's
# The chart as README installs it, with the local image (no registry holds it).
IMAGE_VALUES = ["--set", f"image.repository={IMAGE.split(':')[0]},image.tag={IMAGE.split(':')[1]},"
                "image.pullPolicy=Never"]


def docker(*args, check=True, timeout=1800):
    r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
    return r


def have_image(name):
    return docker("image", "inspect", name, check=False).returncode == 0


def build_images():
    t0 = time.time()
    if not have_image(IMAGE):
        subprocess.run([str(HACK / "image.sh"), IMAGE], check=True)  # the Dockerfile, from source
    subprocess.run([str(HACK / "base-images.sh"), "debian:12"], check=True)
    docker("build", "-q", "-t", TRAINING_IMAGE, "-f", str(HACK / "node" / "training.Dockerfile"),
           str(SRC / "tests" / "e2e"))
    docker("tag", TRAINING_IMAGE, README_PYTORCH_IMAGE)
    return time.time() - t0


class Node(Cluster):
    def logs(self, *args):
        return self.kubectl("logs", *args, check=False, timeout=60).stdout

    def wait(self, what, cond, timeout=180, every=1.0):
        deadline = time.time() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.time() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(every)

    def job_done(self, name, ns):
        """'Complete' or 'Failed' once the job controller has decided, else None."""
        st = self.get("job", name, "-n", ns).get("status", {})
        for c in st.get("conditions", []):
            if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                return c["type"]
        return None

    def pod_of_job(self, name, ns):
        pods = self.get("pods", "-n", ns, "-l", f"job-name={name}")["items"]
        return pods[0] if pods else None


SYSCTLS = ["vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
           "net.ipv4.conf.all.route_localnet", "net.netfilter.nf_conntrack_max",
           "net.netfilter.nf_conntrack_tcp_timeout_established", "net.ipv4.ip_forward"]


def _lines(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.stdout.splitlines() if r.returncode == 0 else []


def host_state(cluster_dir):
    """What of the node is on this host: its processes (by path, or in a kubepods cgroup), mounts,
    netns, bridge and veths, iptables rules, kubepods cgroups, CNI state and log links."""
    d = str(cluster_dir)
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if d in args or "kubepods" in cgroup:
            procs.append(args)
    rules = [line for cmd in (["iptables-save"], ["ip6tables-save"]) for line in _lines(cmd)
             if "KUBE-" in line or "shmguard" in line]
    cni = [str(p) for p in Path("/var/lib/cni/results").glob("*")
           if "shmguard-node" in p.name or p.name.startswith("cni-loopback-")] \
        if Path("/var/lib/cni/results").is_dir() else []
    logs = [str(p) for p in Path("/var/log/containers").glob("*") if p.is_symlink() and d in os.readlink(p)] \
        if Path("/var/log/containers").is_dir() else []
    return {
        "processes": sorted(procs),
        "mounts": sorted(line for line in Path("/proc/self/mounts").read_text().splitlines() if d in line),
        "netns": sorted(_lines(["ip", "netns", "list"])),
        "bridge": sorted(_lines(["ip", "-o", "link", "show", "shmguard0"]) +
                         _lines(["ip", "-o", "link", "show", "master", "shmguard0"])),
        "iptables": sorted(rules),
        "cgroups": sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/kubepods")) +
                   sorted(str(p) for p in Path("/sys/fs/cgroup").glob("kubepods*")),
        "cni": sorted(cni),
        "log_links": sorted(logs),
        "claim": Path("/run/shmguard-node.owner").exists(),
        # What the kubelet's kernel tunables and kube-proxy may change; `down` puts them back.
        "sysctls": {k: Path("/proc/sys/" + k.replace(".", "/")).read_text().strip() for k in SYSCTLS
                    if Path("/proc/sys/" + k.replace(".", "/")).exists()},
    }


@pytest.fixture(scope="session")
def node(tmp_path_factory):
    d = tmp_path_factory.mktemp("node")
    images_s = build_images()
    host_before = host_state(d / "cp")
    t0 = time.time()
    env = cluster_conftest.cluster_up(d / "cp", "--node")
    n = Node(env)
    n.dir = Path(env["CLUSTER_DIR"])
    n.host_before = host_before
    n.startup_seconds = time.time() - t0
    try:
        t1 = time.time()
        r = subprocess.run([str(HACK / "cluster.sh"), "load", IMAGE, TRAINING_IMAGE, README_PYTORCH_IMAGE],
                           capture_output=True, text=True, env=env, timeout=1200)
        assert r.returncode == 0, r.stderr
        sys.stderr.write(f"node: images built in {images_s:.0f}s, node up in {n.startup_seconds:.0f}s, "
                         f"images loaded in {time.time() - t1:.0f}s\n")
        yield n
    finally:
        subprocess.run([str(HACK / "cluster.sh"), "down"], env=env, capture_output=True, timeout=300)


def pytest_collection_modifyitems(items):
    """test_teardown stops the session's node: it runs last."""
    items.sort(key=lambda item: item.module.__name__ == "test_teardown")


README_INSTALL = "helm install shmguard charts/shmguard --namespace shmguard --create-namespace"


def helm_install(node, *extra, release="shmguard", namespace=NAMESPACE, timeout="180s"):
    """README's install command (with the local image and `--wait`), run as a user runs it: the
    CompletedProcess and how long it took."""
    cmd = README_INSTALL.replace("shmguard charts/shmguard --namespace shmguard",
                                 f"{release} charts/shmguard --namespace {namespace}")
    t0 = time.time()
    r = subprocess.run(["bash", "-c", " ".join([cmd, *IMAGE_VALUES, "--wait", "--timeout", timeout, *extra])],
                       cwd=SRC, env=node.env, capture_output=True, text=True, timeout=400)
    return r, time.time() - t0


EARLY_NS = "missed-early"


@pytest.fixture(scope="session")
def before_install(node):
    """A training pod created before shmguard is installed, as on a cluster that ran jobs before it
    (test_missed_and_leftover finds it unprotected, `before-install`)."""
    assert not node.get("mutatingwebhookconfigurations")["items"]
    node.namespace(EARLY_NS)
    node.apply(pod_json("early", annotations={"shmguard.io/batch-size": "32", "shmguard.io/num-workers": "4",
                                              "shmguard.io/sample-size": "1Mi"},
                        labels={"training.kubeflow.org/job-name": "bert"}, command=["sleep", "3600"],
                        terminationGracePeriodSeconds=1), "-n", EARLY_NS)
    time.sleep(1.2)  # creationTimestamps have a second's grain
    return node


@pytest.fixture(scope="session")
def release(node, before_install):
    """README's default install (selfSigned) run as written, from the repository's top, with the local
    image and `--wait`. It waits for nothing else: `helm install --wait` returns once the chart's
    install check has seen a pod injected through the API server, and the tests start at once, as
    a user's next command would."""
    from readme_blocks import commands, section
    assert README_INSTALL in commands(section("Install with Helm"))
    r, node.install_seconds = helm_install(node)
    assert r.returncode == 0, f"{README_INSTALL} failed:\n{r.stdout}\n{r.stderr}"
    sys.stderr.write(f"node: README's helm install --wait returned in {node.install_seconds:.1f}s\n")
    yield node


def injected_dry_run(node):
    """True when a PyTorch pod created (dry run) through the API server comes back injected."""
    r = node.kubectl("create", "--dry-run=server", "-f", str(SRC / "examples" / "pod-pytorch-image.yaml"),
                     "-o", "json", check=False)
    return r.returncode == 0 and shm_volume(json.loads(r.stdout)) is not None


def pod_json(name, annotations=None, image=TRAINING_IMAGE, command=None, limits=None, labels=None, **spec):
    c = {"name": "train", "image": image, "imagePullPolicy": "Never", "command": command or ["sleep", "300"]}
    if limits:
        c["resources"] = {"limits": limits}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
        "spec": {"containers": [c], **spec},
    }


def shm_volume(pod):
    for v in pod["spec"].get("volumes", []):
        if v["name"] == "shmguard-dshm":
            return v
    return None


def dumps(obj):
    return json.dumps(obj, indent=1)
