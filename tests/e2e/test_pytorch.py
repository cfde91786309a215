"""The claim users care about, proven with real PyTorch: a DataLoader that dies with a bus error
in a pod's default 64 MiB /dev/shm finishes in the /dev/shm that shmguard sizes for it.

For every configuration: a pod with the sizing annotations goes through shmguard (the webhook
over TLS, and `shmguard mutate`), the two sizeLimits must agree, the workload runs in a private
tmpfs of exactly that size and must finish, and in 64 MiB it must die with PyTorch's bus-error
message. Needs root and unshare(1) for private /dev/shm mounts; skipped (with the reason) otherwise.
"""
import json
import subprocess

import jsonpatch
import pytest
import yaml

from pylib.paths import BIN
from pylib.pytorch import SKIP, pod_for, run_in_private_shm, run_workload, to_bytes
from pylib.webhook import Server, decode_patch, gen_certs, review

MI = 1 << 20
RESULTS = []


pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")

# (id, batch, workers, sample bytes, prefetch, procs, memory limit or None)
CONFIGS = [
    ("b32-w4-1Mi-p2", 32, 4, 1 * MI, 2, 1, None),
    ("b64-w8-256Ki-p2", 64, 8, 256 * 1024, 2, 1, None),
    ("b32-w4-1Mi-p4", 32, 4, 1 * MI, 4, 1, None),
    ("b128-w3-128Ki-p3", 128, 3, 128 * 1024, 3, 1, None),
    ("2procs-b16-w2-1Mi-p2", 16, 2, 1 * MI, 2, 2, None),
    ("memlimit-b32-w4-1Mi-p4", 32, 4, 1 * MI, 4, 1, "1Gi"),
]


@pytest.fixture(scope="module")
def webhook(tmp_path_factory):
    certs = gen_certs(tmp_path_factory.mktemp("certs"))
    s = Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt")
    yield s
    s.stop()


def size_via_both_paths(webhook, tmp_path, pod, config=None):
    # Webhook path: an AdmissionReview over TLS, the patch applied with jsonpatch.
    status, body = webhook.post(review(pod))
    assert status == 200
    resp = json.loads(body)["response"]
    patched = jsonpatch.apply_patch(pod, decode_patch(resp))
    webhook_size = patched["spec"]["volumes"][-1]["emptyDir"]["sizeLimit"]
    # Offline path: shmguard mutate.
    f = tmp_path / "pod.yaml"
    f.write_text(yaml.safe_dump(pod))
    args = [BIN, "mutate", "-f", str(f), "-o", "json"] + (["--config", str(config)] if config else [])
    out = json.loads(subprocess.run(args, capture_output=True, check=True, text=True).stdout)
    offline_size = out["spec"]["volumes"][-1]["emptyDir"]["sizeLimit"]
    return webhook_size, offline_size, resp.get("warnings", [])


@pytest.mark.parametrize("cid,batch,workers,sample,prefetch,procs,memory_limit", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_bus_error_without_shmguard_and_none_with_it(webhook, tmp_path, cid, batch, workers, sample, prefetch,
                                                   procs, memory_limit):
    pod = pod_for(batch, workers, sample, prefetch, procs, memory_limit)
    webhook_size, offline_size, warnings = size_via_both_paths(webhook, tmp_path, pod)
    assert webhook_size == offline_size, "webhook and offline paths must pick the same size"
    size = to_bytes(webhook_size)
    if memory_limit:
        assert size > to_bytes(memory_limit)
        assert any("memory limit" in w for w in warnings), warnings

    code, peak, err = run_workload(size, batch, workers, sample, prefetch, procs)
    assert code == 0, f"workload failed in the {webhook_size} /dev/shm shmguard chose:\n{err[-3000:]}"
    assert peak and peak <= size

    code64, _, err64 = run_workload(64 * MI, batch, workers, sample, prefetch, procs)
    assert code64 != 0, "the workload was expected to crash in a 64 MiB /dev/shm"
    # PyTorch words it two ways: the main process's "DataLoader worker (pid N) is killed by signal:
    # Bus error", or, when the main process dies first, the worker's own "Unexpected bus error".
    assert ("DataLoader worker" in err64 and "Bus error" in err64) or \
        "Unexpected bus error encountered in worker" in err64, err64[-3000:]

    RESULTS.append((cid, webhook_size, peak, size / peak))
    print(f"\n{cid}: shmguard {webhook_size}, peak /dev/shm {peak / MI:.1f} MiB, size/peak {size / peak:.2f}")


def test_formula_alone_is_enough(webhook, tmp_path):
    """With min, base and the NCCL allowance set to almost nothing, the size is the loader term
    of the formula alone: the workload must still finish in it."""
    cfg = tmp_path / "tight.yaml"
    cfg.write_text("sizing:\n  min: 1Mi\n  base: 0\n  ncclPerProcess: 0\n")
    batch, workers, sample, prefetch, procs = 32, 4, 1 * MI, 4, 1
    pod = pod_for(batch, workers, sample, prefetch, procs, None)
    f = tmp_path / "pod.yaml"
    f.write_text(yaml.safe_dump(pod))
    out = json.loads(subprocess.run([BIN, "mutate", "-f", str(f), "-o", "json", "--config", str(cfg)],
                                    capture_output=True, check=True, text=True).stdout)
    size_text = out["spec"]["volumes"][-1]["emptyDir"]["sizeLimit"]
    size = to_bytes(size_text)
    assert size == (workers * prefetch + 2) * batch * sample * 3 // 2  # 864Mi
    code, peak, err = run_workload(size, batch, workers, sample, prefetch, procs)
    assert code == 0, err[-3000:]
    print(f"\nloader term only: {size_text}, peak {peak / MI:.1f} MiB, size/peak {size / peak:.2f}")


def test_sized_from_the_commands_flags(webhook, tmp_path):
    """A pod whose image is named after its product and which carries only the sample size (the one
    thing a command never states): shmguard reads batch size, workers and prefetch factor from the
    command, and names them in the sizing text. The command itself then runs in the size chosen, and crashes
    in the runtime's 64 MiB."""
    batch, workers, sample, prefetch = 32, 4, 1 * MI, 4
    args = ["--batch-size", str(batch), "--num-workers", str(workers), "--prefetch-factor", str(prefetch),
            "--sample-size", str(sample), "--steps", "16", "--step-seconds", "0.25"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "vision", "annotations": {"shmguard.io/sample-size": "1Mi"}},
           "spec": {"containers": [{"name": "train", "image": "registry.example/acme/vision-trainer:2",
                                    "command": ["python3", "/opt/train.py", *args]}]}}
    webhook_size, offline_size, warnings = size_via_both_paths(webhook, tmp_path, pod)
    assert webhook_size == offline_size == "1120Mi", (webhook_size, offline_size)  # 864Mi + base 256Mi
    f = tmp_path / "pod.yaml"
    f.write_text(yaml.safe_dump(pod))
    out = json.loads(subprocess.run([BIN, "mutate", "-f", str(f), "-o", "json"], capture_output=True, check=True,
                                    text=True).stdout)
    assert out["metadata"]["annotations"]["shmguard.io/sizing"] == (
        "batch 32 x 1Mi = 32Mi; loader (4 workers x prefetch 4 + 2) x 32Mi = 576Mi; procs 1 (default); need 1 x 576Mi"
        " x 1.5 + base 256Mi = 1120Mi -> 1120Mi (from the command: --batch-size 32, --num-workers 4, --prefetch-factor 4; recognised by: annotation shmguard.io/sample-size)")
    # The loader term alone (min, base and NCCL set to nothing): the command still finishes in it.
    cfg = tmp_path / "tight.yaml"
    cfg.write_text("sizing:\n  min: 1Mi\n  base: 0\n  ncclPerProcess: 0\n")
    tight = json.loads(subprocess.run([BIN, "mutate", "-f", str(f), "-o", "json", "--config", str(cfg)],
                                      capture_output=True, check=True, text=True).stdout)
    size = to_bytes(tight["spec"]["volumes"][-1]["emptyDir"]["sizeLimit"])
    assert size == (workers * prefetch + 2) * batch * sample * 3 // 2  # 864Mi
    code, peak, err = run_in_private_shm(size, " ".join(args))
    assert code == 0, err[-3000:]
    assert peak and peak <= size
    code64, _, err64 = run_in_private_shm(64 * MI, " ".join(args))
    assert code64 != 0 and ("Bus error" in err64 or "bus error" in err64), err64[-3000:]
    print(f"\nsized from the command's flags: {size / MI:.0f} MiB, peak {peak / MI:.1f} MiB")
