"""Training pods made by the real training operators on the node: Kubeflow Trainer v2.0.0 with JobSet
v0.8.2 (TrainJob -> JobSet -> Job -> Pod) and Kubeflow training-operator v1.8.1 (PyTorchJob ->
Pod), started by hack/node/operators.sh beside the session's node, with their own webhooks. Each job
runs the DataLoader workload under torch's own torchrun, 2 processes per pod, on CPU:
  - the pods the operator creates carry shmguard's volume at the size `shmguard size ...
    --procs-per-pod 2` gives for the user's hints (which reach them where each operator's users
    write them: TrainJob.spec.annotations, the PyTorchJob replica's pod template);
  - every rank's DataLoader finishes, in the /dev/shm the kubelet mounted;
  - the same job opted out (shmguard.io/inject: "false") dies of the bus error in the runtime's 64 MiB;
  - `shmguard check -o json` on the files the test applied predicts the size and procs the webhook
    gave the pods.
The four jobs run at once. The operators' binaries: SHMGUARD_OPERATORS_BIN (`hack/testbin.sh
operators`, which hack/test.sh's operators stage builds); without it the module is skipped.
KubeRay is not here: no image on this machine has Ray (docs/operators.md, KubeRay)."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pylib.node import TRAINING_IMAGE, dumps, shm_volume
from pylib.paths import BIN, HACK
from pylib.pytorch import to_bytes
from pylib.node import BUS_ERROR, MiB, shm_bytes

OPS_BIN = os.environ.get("SHMGUARD_OPERATORS_BIN")
pytestmark = pytest.mark.skipif(not OPS_BIN, reason="SHMGUARD_OPERATORS_BIN not set (hack/testbin.sh operators)")

# Hints per job, and the workload that matches them. Each is well above 1Gi (the minimum) for 2
# processes, and below it for 1, so the size says how many processes it counted.
TRAINJOB_HINTS = {"batch": 32, "workers": 4, "sample": "1Mi"}
PYTORCHJOB_HINTS = {"batch": 24, "workers": 4, "sample": "1280Ki"}


def annotations(h, **extra):
    return {"shmguard.io/batch-size": str(h["batch"]), "shmguard.io/num-workers": str(h["workers"]),
            "shmguard.io/sample-size": h["sample"], **extra}


def size_cli(h, procs):
    r = subprocess.run([BIN, "size", "--batch-size", str(h["batch"]), "--num-workers", str(h["workers"]),
                        "--sample-size", h["sample"], "--procs-per-pod", str(procs)],
                       capture_output=True, text=True, check=True)
    return r.stdout.splitlines()[0]


def script(h):
    """The container's command: the size of its /dev/shm, then torchrun (its PET_* environment from
    the operator: nodes, processes per node, node rank, master) over the DataLoader workload. Each
    rank's stdout teed into the container's log, as a per-rank mapping: Debian's torch 1.13 parses
    neither the default "0" nor a rank mapped to 0 (both give None, and the agent dies)."""
    return ("df -B1 --output=size /dev/shm | tail -n 1 | sed 's/^ */shm-bytes /'; "
            "exec python3 -m torch.distributed.run --redirects 0:1,1:1 --tee 0:1,1:1 "
            "/opt/shmguard/dataloader_workload.py --child "
            f"--batch-size {h['batch']} --num-workers {h['workers']} --sample-size {to_bytes(h['sample'])} "
            "--steps 6 --step-seconds 0.3")


def trainjob(name, ann):
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "annotations": ann,
                     "trainer": {"image": TRAINING_IMAGE, "command": ["sh", "-c", script(TRAINJOB_HINTS)],
                                 "numNodes": 1, "numProcPerNode": 2}}}


def pytorchjob(name, ann):
    def replica():
        return {"replicas": 1, "restartPolicy": "Never",
                "template": {"metadata": {"annotations": ann},
                             "spec": {"containers": [{"name": "pytorch", "image": TRAINING_IMAGE,
                                                      "imagePullPolicy": "Never",
                                                      "command": ["sh", "-c", script(PYTORCHJOB_HINTS)]}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"nprocPerNode": "2", "runPolicy": {"backoffLimit": 0},
                     "pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}}}


def runtime_file():
    """Trainer's torch-distributed ClusterTrainingRuntime, where hack/testbin.sh found its module."""
    sources = dict(line.split(" ", 1) for line in (Path(OPS_BIN) / "sources").read_text().splitlines())
    return Path(sources["trainer"].strip()) / "manifests" / "base" / "runtimes" / "torch_distributed.yaml"


def procs_of(pod):
    m = re.search(r"procs (\d+) from ([^;)]+)", pod["metadata"]["annotations"].get("shmguard.io/sizing", ""))
    assert m, f"no procs in the pod's sizing annotation:\n{dumps(pod['metadata'])}"
    return int(m.group(1)), m.group(2).strip()


class Watch:
    """Every second, each pod of a selector: the pod object and its container's log, kept as last
    seen. JobSet deletes a failed Job's pods at once, so a failed pod is caught while it lives."""

    def __init__(self, node, ns, selector, container):
        self.node, self.ns, self.selector, self.container = node, ns, selector, container
        self.pods, self.logs, self.deleted = {}, {}, set()

    def poll(self):
        items = self.node.get("pods", "-n", self.ns, "-l", self.selector)["items"]
        seen = set()
        for pod in items:
            name = pod["metadata"]["name"]
            seen.add(name)
            self.pods[name] = pod
            for previous in ([], ["--previous"]):
                log = self.node.logs("-n", self.ns, name, "-c", self.container, *previous)
                if log and len(log) >= len(self.logs.get((name, bool(previous)), "")):
                    self.logs[(name, bool(previous))] = log
        self.deleted |= set(self.pods) - seen

    def log(self, name):
        return "\n".join(v for (n, _), v in sorted(self.logs.items()) if n == name)

    def terminated(self, name):
        for s in self.pods[name].get("status", {}).get("containerStatuses", []):
            st = s.get("state", {}).get("terminated") or s.get("lastState", {}).get("terminated")
            if s["name"] == self.container and st:
                return st
        return None


def ranks_finished(log):
    return sorted(json.loads(line[line.index("{"):])["rank"] for line in log.splitlines()
                  if '"checksum"' in line and "{" in line)


@pytest.fixture(scope="module")
def operators(release):
    t0 = time.time()
    r = subprocess.run([str(HACK / "node" / "operators.sh"), "up", str(release.dir), str(release.bindir), OPS_BIN],
                       capture_output=True, text=True, env=release.env, timeout=600)
    assert r.returncode == 0, f"hack/node/operators.sh up failed:\n{r.stderr}"
    release.operators_seconds = time.time() - t0
    sys.stderr.write(r.stderr + f"node: operators up in {release.operators_seconds:.0f}s\n")
    return release


@pytest.fixture(scope="module")
def runs(operators, tmp_path_factory):
    """The four jobs, submitted at once and watched until each has an outcome."""
    node = operators
    d = tmp_path_factory.mktemp("operator-jobs")
    ns = node.namespace("operator-jobs")
    jobs = {
        "tj": trainjob("tj-dataloader", annotations(TRAINJOB_HINTS)),
        "tj-out": trainjob("tj-opted-out", annotations(TRAINJOB_HINTS, **{"shmguard.io/inject": "false"})),
        "pj": pytorchjob("pj-dataloader", annotations(PYTORCHJOB_HINTS)),
        "pj-out": pytorchjob("pj-opted-out", annotations(PYTORCHJOB_HINTS, **{"shmguard.io/inject": "false"})),
    }
    files = {}
    for key, obj in jobs.items():
        files[key] = d / f"{key}.yaml"
        files[key].write_text(yaml.safe_dump(obj))
    t0 = time.time()
    for key in jobs:
        node.kubectl("apply", "-n", ns, "-f", str(files[key]))
    watches = {
        "tj": Watch(node, ns, "jobset.sigs.k8s.io/jobset-name=tj-dataloader", "node"),
        "tj-out": Watch(node, ns, "jobset.sigs.k8s.io/jobset-name=tj-opted-out", "node"),
        "pj": Watch(node, ns, "training.kubeflow.org/job-name=pj-dataloader", "pytorch"),
        "pj-out": Watch(node, ns, "training.kubeflow.org/job-name=pj-opted-out", "pytorch"),
    }
    expected_pods = {"tj": 1, "tj-out": 1, "pj": 2, "pj-out": 2}

    def done(key):
        w = watches[key]
        if len(w.pods) < expected_pods[key]:
            return False
        if key.endswith("-out"):  # the bus error seen in one of its pods
            return any(BUS_ERROR.search(w.log(p)) for p in w.pods)
        return all(w.terminated(p) for p in w.pods)

    pending = set(jobs)
    deadline = time.time() + 600
    while pending and time.time() < deadline:
        for key in sorted(pending):
            watches[key].poll()
            if done(key):
                pending.discard(key)
                sys.stderr.write(f"node: {key} done after {time.time() - t0:.0f}s\n")
        time.sleep(1)
    yield {"ns": ns, "files": files, "watches": watches, "pending": pending, "seconds": time.time() - t0}
    node.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def check_items(*files):
    r = subprocess.run([BIN, "check", "-o", "json", "--fail-on", "none", *map(str, files)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["items"]


def test_trainjob_pod_gets_the_size_for_2_procs_and_both_ranks_finish(runs):
    w = runs["watches"]["tj"]
    assert "tj" not in runs["pending"], f"the TrainJob did not finish in time: {dumps({p: w.log(p) for p in w.pods})}"
    want = size_cli(TRAINJOB_HINTS, 2)
    assert to_bytes(want) > to_bytes(size_cli(TRAINJOB_HINTS, 1))  # the size counts the processes
    for name, pod in w.pods.items():
        vol = shm_volume(pod)
        assert vol, f"Trainer's pod {name} was not injected:\n{dumps(pod['spec'])}"
        assert vol["emptyDir"]["sizeLimit"] == want, vol
        assert pod["metadata"]["annotations"]["shmguard.io/injected-size"] == want
        # The user's hints, from TrainJob.spec.annotations, read where Trainer and JobSet stop them.
        sizing = pod["metadata"]["annotations"]["shmguard.io/sizing"]
        assert f"annotations from JobSet {runs['ns']}/tj-dataloader" in sizing, sizing
        assert procs_of(pod) == (2, "PET_NPROC_PER_NODE"), sizing
        env = {e["name"]: e.get("value") for c in pod["spec"]["containers"] for e in c.get("env", [])}
        assert env.get("PET_NPROC_PER_NODE") == "2", env  # Trainer's, from numProcPerNode
        log = w.log(name)
        assert shm_bytes(log) == to_bytes(want), log  # the kubelet mounted exactly that
        assert ranks_finished(log) == [0, 1], log
        assert w.terminated(name)["exitCode"] == 0, log
        assert not BUS_ERROR.search(log), log


def test_trainjob_opted_out_dies_of_the_bus_error(runs):
    w = runs["watches"]["tj-out"]
    logs = {p: w.log(p) for p in w.pods}
    assert "tj-out" not in runs["pending"], f"no bus error seen in the opted-out TrainJob's pods: {dumps(logs)}"
    for name, pod in w.pods.items():
        assert shm_volume(pod) is None, pod["spec"].get("volumes")
    name = next(p for p in w.pods if BUS_ERROR.search(logs[p]))
    assert shm_bytes(logs[name]) == 64 * MiB, logs[name]  # the runtime's default /dev/shm


def test_check_on_the_trainjob_and_its_runtime_predicts_what_the_pod_got(runs):
    w = runs["watches"]["tj"]
    assert w.pods, "no pod of the TrainJob was seen"
    items = [i for i in check_items(runs["files"]["tj"], runtime_file()) if i["kind"] == "TrainJob"]
    assert len(items) == 1, items
    pod = next(iter(w.pods.values()))
    assert (items[0]["size"], items[0]["procs"]["count"]) == (shm_volume(pod)["emptyDir"]["sizeLimit"],
                                                             procs_of(pod)[0]), items[0]


def test_pytorchjob_pods_get_the_size_for_2_procs_and_every_rank_finishes(runs):
    w = runs["watches"]["pj"]
    assert "pj" not in runs["pending"], f"the PyTorchJob did not finish in time: {dumps({p: w.log(p) for p in w.pods})}"
    want = size_cli(PYTORCHJOB_HINTS, 2)
    assert to_bytes(want) > to_bytes(size_cli(PYTORCHJOB_HINTS, 1))
    ranks = []
    roles = set()
    for name, pod in w.pods.items():
        roles.add(pod["metadata"]["labels"].get("training.kubeflow.org/replica-type"))
        vol = shm_volume(pod)
        assert vol, f"training-operator's pod {name} was not injected:\n{dumps(pod['spec'])}"
        assert vol["emptyDir"]["sizeLimit"] == want, vol
        # The hints on the replica's template, copied onto the pod by the operator.
        for k, v in annotations(PYTORCHJOB_HINTS).items():
            assert pod["metadata"]["annotations"].get(k) == v, pod["metadata"]["annotations"]
        assert procs_of(pod) == (2, "PET_NPROC_PER_NODE"), pod["metadata"]["annotations"]
        log = w.log(name)
        assert shm_bytes(log) == to_bytes(want), log
        assert w.terminated(name)["exitCode"] == 0, log
        assert not BUS_ERROR.search(log), log
        ranks += ranks_finished(log)
    assert roles == {"master", "worker"}, roles
    assert sorted(ranks) == [0, 1, 2, 3], ranks  # 2 pods x 2 processes: world size 4


def test_pytorchjob_opted_out_dies_of_the_bus_error(runs):
    w = runs["watches"]["pj-out"]
    logs = {p: w.log(p) for p in w.pods}
    assert "pj-out" not in runs["pending"], f"no bus error seen in the opted-out PyTorchJob's pods: {dumps(logs)}"
    for pod in w.pods.values():
        assert shm_volume(pod) is None, pod["spec"].get("volumes")
    name = next(p for p in w.pods if BUS_ERROR.search(logs[p]))
    assert shm_bytes(logs[name]) == 64 * MiB, logs[name]
    # The operator marks the job failed (backoffLimit 0) and then deletes its pods (seen on v1.8.1).
    def failed():
        st = w.node.get("pytorchjob", "pj-opted-out", "-n", runs["ns"]).get("status", {})
        return any(c["type"] == "Failed" and c["status"] == "True" for c in st.get("conditions", []))
    w.node.wait("PyTorchJob pj-opted-out Failed", failed, timeout=120)


def test_check_on_the_pytorchjob_predicts_what_its_pods_got(runs):
    w = runs["watches"]["pj"]
    assert w.pods, "no pod of the PyTorchJob was seen"
    items = check_items(runs["files"]["pj"])
    by_role = {}
    for i in items:
        m = re.search(r"pytorchReplicaSpecs\.(\w+)\.template", i.get("path", "") + " " + json.dumps(i))
        assert m, i
        by_role[m.group(1).lower()] = i
    assert sorted(by_role) == ["master", "worker"], items
    for pod in w.pods.values():
        role = pod["metadata"]["labels"]["training.kubeflow.org/replica-type"]
        i = by_role[role]
        assert (i["size"], i["procs"]["count"]) == (shm_volume(pod)["emptyDir"]["sizeLimit"], procs_of(pod)[0]), i
