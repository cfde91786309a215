"""The process count, proven with the real torchrun: kubeflow/training-operator's cpu-demo
PyTorchJob (nprocPerNode "2", no GPUs) with DataLoader annotations. shmguard must size its pods for
the two processes torchrun starts; torch's own torch.distributed.run (Debian's python3-torch, gloo on
CPU, rendezvous on loopback) then runs the repo's DataLoader workload in each rank:
- in a private /dev/shm of the size shmguard computes (offline from nprocPerNode, and over TLS for
  the pod the operator creates, with PET_NPROC_PER_NODE), it finishes;
- in the size shmguard would compute without that source (one process), it dies with PyTorch's
  bus error. That is the crash shmguard sized before procs came from the job.
Needs root and unshare(1); skipped with the reason otherwise."""
import json
import subprocess

import jsonpatch
import pytest
import yaml

from pylib.paths import BIN, SRC
from pylib.webhook import Server, decode_patch, gen_certs, review
from pylib.pytorch import SKIP, run_in_private_shm, to_bytes

JOB = SRC / "tests" / "golden" / "owners" / "pytorchjob-cpu-demo.yaml"
MI = 1 << 20

pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


def check_json(path):
    r = subprocess.run([BIN, "check", "-f", str(path), "-o", "json", "--fail-on", "none"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["items"]


def run_torchrun(shm_bytes, nproc, ann):
    # A slow training step (1 s) so that every prefetch slot of every rank fills even on a busy machine.
    return run_in_private_shm(shm_bytes, f"--batch-size {ann['shmguard.io/batch-size']} "
                                         f"--num-workers {ann['shmguard.io/num-workers']} "
                                         f"--sample-size {to_bytes(ann['shmguard.io/sample-size'])} "
                                         f"--torchrun {nproc} --steps 12 --step-seconds 1.0", timeout=300)


def test_cpu_demo_pytorchjob_is_sized_for_the_processes_torchrun_starts(tmp_path):
    job = yaml.safe_load(JOB.read_text())
    nproc = int(job["spec"]["nprocPerNode"])
    assert nproc == 2
    template = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    ann = template["metadata"]["annotations"]

    # Offline: check reads nprocPerNode and says so.
    items = check_json(JOB)
    assert {i["size"] for i in items} == {"4353Mi"}, items
    for i in items:
        assert i["procs"] == {"count": 2, "source": "PyTorchJob spec.nprocPerNode"}, i
        assert "procs 2 from PyTorchJob spec.nprocPerNode" in i["sizing"]
    size_text = items[0]["size"]

    # Webhook: the pod the operator creates (its env carries nprocPerNode), over TLS.
    certs = gen_certs(tmp_path / "certs")
    server = Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt")
    try:
        container = dict(template["spec"]["containers"][0])
        container["env"] = [{"name": "PET_NPROC_PER_NODE", "value": job["spec"]["nprocPerNode"]}]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"generateName": "torchrun-cpu-worker-", "annotations": ann,
                            "labels": {"training.kubeflow.org/job-name": "torchrun-cpu"}},
               "spec": {"containers": [container]}}
        status, body = server.post(review(pod))
        assert status == 200
        patched = jsonpatch.apply_patch(pod, decode_patch(json.loads(body)["response"]))
        assert patched["spec"]["volumes"][-1]["emptyDir"]["sizeLimit"] == size_text
        assert "procs 2 from PET_NPROC_PER_NODE" in patched["metadata"]["annotations"]["shmguard.io/sizing"]
        logs = [l for l in server.logs() if l.get("decision") == "injected"]
        assert logs and logs[-1]["procs"] == "2 from PET_NPROC_PER_NODE", logs
    finally:
        server.stop()

    # The size without the procs source: the same job, nprocPerNode removed.
    del job["spec"]["nprocPerNode"]
    single = tmp_path / "single.yaml"
    single.write_text(yaml.safe_dump(job))
    single_size = check_json(single)[0]["size"]
    assert to_bytes(single_size) < to_bytes(size_text)

    code, peak, err = run_torchrun(to_bytes(size_text), nproc, ann)
    assert code == 0, f"torchrun --nproc_per_node {nproc} failed in the {size_text} shmguard chose:\n{err[-3000:]}"
    assert peak and peak <= to_bytes(size_text)
    # Both ranks ran a DataLoader: the peak is above what one process can hold.
    assert peak > to_bytes(single_size), (peak, single_size)

    code1, _, err1 = run_torchrun(to_bytes(single_size), nproc, ann)
    assert code1 != 0, f"two ranks were expected to crash in the one-process size {single_size}"
    assert ("DataLoader worker" in err1 and "Bus error" in err1) or \
        "Unexpected bus error encountered in worker" in err1, err1[-3000:]
    print(f"\ncpu-demo: shmguard {size_text} (2 procs), peak {peak / MI:.0f} MiB, finished; "
          f"{single_size} (1 proc): bus error")
