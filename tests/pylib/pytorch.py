"""The real PyTorch DataLoader (tests/e2e/dataloader_workload.py) in a private tmpfs at /dev/shm,
as a pod with that sizeLimit has it, and the pods that ask for it; quantities as bytes."""
import json
import os
import shutil
import subprocess

from pylib.paths import SRC

WORKLOAD = SRC / "tests" / "e2e" / "dataloader_workload.py"
PYTHON = "/usr/bin/python3"


def can_run():
    if os.geteuid() != 0:
        return "needs root for private /dev/shm mounts (unshare -m)"
    if not shutil.which("unshare"):
        return "unshare(1) not found"
    r = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if r.returncode != 0:
        return "unshare -m not permitted here: " + r.stderr.decode().strip()
    r = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True)
    if r.returncode != 0:
        return "python3-torch is not installed (hack/deps.sh test installs it)"
    return None


# Why the real-PyTorch runs cannot run here, or None.
SKIP = can_run()


def pod_for(batch, workers, sample, prefetch, procs, memory_limit):
    ann = {"shmguard.io/batch-size": str(batch), "shmguard.io/num-workers": str(workers),
           "shmguard.io/sample-size": str(sample), "shmguard.io/prefetch-factor": str(prefetch),
           "shmguard.io/procs-per-pod": str(procs)}
    container = {"name": "train", "image": "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"}
    if memory_limit:
        container["resources"] = {"limits": {"memory": memory_limit}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "annotations": ann},
            "spec": {"containers": [container]}}


def to_bytes(quantity):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
    for u, m in units.items():
        if quantity.endswith(u):
            return int(quantity[:-2]) * m
    return int(quantity)


def run_in_private_shm(shm_bytes, workload_args, timeout=240):
    """The DataLoader workload in a private tmpfs of `shm_bytes` at /dev/shm, as a pod with that
    sizeLimit has it: (exit code, peak /dev/shm bytes or None, stderr)."""
    cmd = f"mount -t tmpfs -o size={shm_bytes} tmpfs /dev/shm && exec {PYTHON} {WORKLOAD} {workload_args}"
    r = subprocess.run(["unshare", "-m", "sh", "-c", cmd], capture_output=True, timeout=timeout)
    out = r.stdout.decode(errors="replace")
    peak = None
    for line in out.splitlines():
        if line.startswith('{"peak_shm_bytes"'):
            peak = json.loads(line)["peak_shm_bytes"]
    return r.returncode, peak, r.stderr.decode(errors="replace")


def run_workload(shm_bytes, batch, workers, sample, prefetch, procs):
    return run_in_private_shm(shm_bytes, f"--batch-size {batch} --num-workers {workers} --sample-size {sample} "
                                         f"--prefetch-factor {prefetch} --procs {procs} --steps 16 --step-seconds 0.25")
