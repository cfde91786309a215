"""README's "Install with Helm" and "Verify" steps, read out of README.md and run as written against
the real node (the release fixture ran the install command). What differs from a reader's run:
`helm install` gets the local image (`--set image.repository=...,image.pullPolicy=Never`: no
registry holds it), `job.yaml` is examples/job-small-shm.yaml, and the PyTorch image that `kubectl
run shm-check` names is the Debian-built training image tagged with that name (nothing can be
pulled here)."""
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BIN, SRC
from readme_blocks import commands, section


def verify_commands():
    cmds = commands(section("Install with Helm"))
    start = next(i for i, c in enumerate(cmds) if c.startswith("helm test shmguard"))
    return cmds[start:start + 10]


def port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "charts").symlink_to(SRC / "charts")
    (tmp_path / "examples").symlink_to(SRC / "examples")
    shutil.copy(SRC / "examples" / "job-small-shm.yaml", tmp_path / "job.yaml")
    return tmp_path


def test_verify_steps_as_written(release, workdir):
    node = release
    env = dict(node.env, PATH=f"{Path(BIN).parent}:{node.env['PATH']}")
    cmds = verify_commands()
    assert [c.split()[0] for c in cmds] == ["helm", "kubectl", "kubectl", "kubectl", "kubectl", "shmguard",
                                            "kubectl", "kubectl", "kubectl"], cmds
    outputs = {}
    forward = None
    try:
        for cmd in cmds:
            if cmd.endswith("&"):  # the port-forward: kept running while the next steps use it
                forward = subprocess.Popen(["bash", "-c", cmd[:-1]], cwd=workdir, env=env,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                node.wait("kubectl port-forward", lambda: port_open(8443), timeout=30, every=0.2)
                continue
            r = subprocess.run(["bash", "-c", cmd], cwd=workdir, env=env, capture_output=True, text=True,
                               timeout=300)
            assert r.returncode == 0, f"README command failed: {cmd}\n{r.stdout}\n{r.stderr}"
            outputs[cmd.split()[0] + " " + cmd.split()[1] + " " + cmd.split()[2]] = r.stdout
            if cmd.startswith("kubectl run shm-check"):
                node.wait("pod shm-check running", lambda: node.get("pod", "shm-check")["status"].get("phase")
                          == "Running", timeout=120)
    finally:
        if forward:
            forward.terminate()
            forward.wait(10)
        node.kubectl("delete", "pod", "shm-check", "--ignore-not-found", "--wait=false", check=False)
    by_prefix = {k: v for k, v in outputs.items()}
    assert "Phase:          Succeeded" in by_prefix["helm test shmguard"]
    assert re.search(r"10\.213\.0\.\d+:8443,10\.213\.0\.\d+:8443", by_prefix["kubectl -n shmguard"])
    assert by_prefix["kubectl create --dry-run=server"].strip() == "8Gi"
    assert "decision" in by_prefix["shmguard review --server"].lower() or \
        "inject" in by_prefix["shmguard review --server"].lower(), by_prefix["shmguard review --server"]
    df = by_prefix["kubectl exec shm-check"]
    assert re.search(r"^shm\s+1\.0G\s", df, re.M), f"README says 1.0G; df printed:\n{df}"
    assert by_prefix["kubectl get pod"].startswith("need "), by_prefix["kubectl get pod"]
