"""The real node of `hack/cluster.sh up --node`: the images it runs (nothing can be pulled), the
chart installed as README says, Jobs running the real DataLoader, and what of the node is on the
host (what `down` must take away)."""
import json
import os
import re
import subprocess
import time
from pathlib import Path

from pylib import cluster
from pylib.cluster import Cluster, docker
from pylib.paths import HACK, SRC

IMAGE = cluster.IMAGE or "shmguard:test"
TRAINING_IMAGE = "shmguard-training:test"
README_PYTORCH_IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
NAMESPACE = "shmguard"  # README's
# The chart as README installs it, with the local image (no registry holds it).
IMAGE_VALUES = ["--set", f"image.repository={IMAGE.split(':')[0]},image.tag={IMAGE.split(':')[1]},"
                "image.pullPolicy=Never"]


def have_image(name):
    return docker("image", "inspect", name, check=False).returncode == 0


def build_images():
    t0 = time.time()
    if not have_image(IMAGE):
        subprocess.run([str(HACK / "image.sh"), IMAGE], check=True)  # the Dockerfile, from source
    subprocess.run([str(HACK / "base-images.sh"), "debian:12"], check=True)
    docker("build", "-q", "-t", TRAINING_IMAGE, "-f", str(HACK / "node" / "training.Dockerfile"),
           str(SRC / "tests" / "e2e"), timeout=1800)
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


MiB = 1 << 20
# (2 workers x prefetch 2 + 1) x 16 x 1 MiB = 80 MiB of /dev/shm at the peak: more than 64 MiB.
WORKLOAD = ["--batch-size", "16", "--num-workers", "2", "--sample-size", str(MiB), "--steps", "8"]
ANNOTATIONS = {"shmguard.io/batch-size": "16", "shmguard.io/num-workers": "2", "shmguard.io/sample-size": "1Mi"}
BUS_ERROR = re.compile(r"DataLoader worker \(pid \d+\) is killed by signal: Bus error")


def job(name, annotations, labels=None, limits=None, workload=WORKLOAD):
    script = "df -B1 --output=size /dev/shm | tail -n 1 | sed 's/^ */shm-bytes /'; " \
             "exec python3 /opt/shmguard/dataloader_workload.py " + " ".join(workload)
    c = {"name": "train", "image": TRAINING_IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", script]}
    if limits:
        c["resources"] = {"limits": limits}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations, "labels": labels or {}},
                "spec": {"restartPolicy": "Never", "containers": [c]},
            },
        },
    }


def shm_bytes(log):
    m = re.search(r"^shm-bytes (\d+)$", log, re.M)
    assert m, f"no df line in the pod's log:\n{log}"
    return int(m.group(1))


def node_up(cluster_dir, **extra_env):
    env = dict(os.environ, CLUSTER_DIR=str(cluster_dir), **extra_env)
    r = subprocess.run([str(HACK / "cluster.sh"), "up", "--node"], capture_output=True, text=True, env=env,
                       timeout=900)
    return r, env
