"""A batch/v1 Job whose pod the job controller creates and the API server sends through the chart's
webhook on the way: the kubelet mounts the injected emptyDir at /dev/shm, the pod's own `df`
shows its size, and the real DataLoader finishes. The same Job opted out gets the runtime's 64 MiB
and dies with PyTorch's bus error. A need above the pod's memory limit: what the kubelet really
mounts and what happens to the workload."""

import pytest

from pylib.node import ANNOTATIONS, BUS_ERROR, MiB, dumps, job, shm_bytes, shm_volume
from pylib.pytorch import to_bytes


def run_job(node, ns, obj, timeout=300):
    node.apply(obj, "-n", ns)
    name = obj["metadata"]["name"]
    outcome = node.wait(f"job {name}", lambda: node.job_done(name, ns), timeout=timeout, every=2)
    pod = node.pod_of_job(name, ns)
    assert pod, f"the job controller made no pod for {name}"
    return outcome, pod, node.logs("-n", ns, pod["metadata"]["name"])


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
