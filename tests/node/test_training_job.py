"""A batch/v1 Job whose pod the job controller creates and the API server sends through the chart's
webhook on the way: the kubelet mounts the injected emptyDir at /dev/shm, the pod's own `df`
shows its size, and the real DataLoader finishes. The same Job opted out gets the runtime's 64 MiB
and dies with PyTorch's bus error. A need above the pod's memory limit: what the kubelet really
mounts and what happens to the workload."""
import re

import pytest

from conftest import TRAINING_IMAGE, dumps, shm_volume
from test_pytorch import to_bytes  # tests/e2e, on the path through tests/cluster's conftest

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


def run_job(node, ns, obj, timeout=300):
    node.apply(obj, "-n", ns)
    name = obj["metadata"]["name"]
    outcome = node.wait(f"job {name}", lambda: node.job_done(name, ns), timeout=timeout, every=2)
    pod = node.pod_of_job(name, ns)
    assert pod, f"the job controller made no pod for {name}"
    return outcome, pod, node.logs("-n", ns, pod["metadata"]["name"])


def shm_bytes(log):
    m = re.search(r"^shm-bytes (\d+)$", log, re.M)
    assert m, f"no df line in the pod's log:\n{log}"
    return int(m.group(1))


@pytest.fixture(scope="module")
def ns(release):
    name = release.namespace("training-jobs")
    yield name
    release.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_job_pod_is_injected_sized_and_finishes(release, ns):
    outcome, pod, log = run_job(release, ns, job("dataloader", ANNOTATIONS))
    vol = shm_volume(pod)
    assert vol, f"the job controller's pod was not injected:\n{dumps(pod['spec'])}"
    size = to_bytes(vol["emptyDir"]["sizeLimit"])
    assert pod["metadata"]["annotations"]["shmguard.io/injected-size"] == vol["emptyDir"]["sizeLimit"]
    # The kubelet mounted a tmpfs of exactly sizeLimit at /dev/shm.
    assert shm_bytes(log) == size, log
    assert outcome == "Complete", log
    assert '"peak_shm_bytes"' in log and not BUS_ERROR.search(log), log


def test_the_same_job_opted_out_dies_with_the_bus_error(release, ns):
    annotations = dict(ANNOTATIONS, **{"shmguard.io/inject": "false"})
    outcome, pod, log = run_job(release, ns, job("dataloader-opted-out", annotations))
    assert shm_volume(pod) is None
    assert shm_bytes(log) == 64 * MiB, log  # the runtime's default /dev/shm
    assert outcome == "Failed", log
    assert BUS_ERROR.search(log), f"no bus error in `kubectl logs`:\n{log}"
