"""README's "Install with Helm" and "Verify" steps, read out of README.md and run as written against
the real node (the release fixture ran the install command). What differs from a reader's run:
`helm install` gets the local image (`--set image.repository=...,image.pullPolicy=Never`: no
registry holds it), `job.yaml` is examples/pytorchjob-resnet.yaml, and the PyTorch image that `kubectl
run shm-check` names is the Debian-built training image tagged with that name (nothing can be
pulled here)."""
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from pylib.paths import BIN, SRC
from pylib.readme_blocks import commands, section


def verify_commands():
    """The commands of README's "Verify" block."""
    blocks = re.findall(r"```sh\n.*?```", section("Install with Helm"), re.S)
    return commands(next(b for b in blocks if "helm test shmguard" in b))


def port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "charts").symlink_to(SRC / "charts")
    (tmp_path / "examples").symlink_to(SRC / "examples")
    shutil.copy(SRC / "examples" / "pytorchjob-resnet.yaml", tmp_path / "job.yaml")
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
            outputs[cmd] = r.stdout
            if cmd.startswith("kubectl run shm-check"):
                node.wait("pod shm-check running", lambda: node.get("pod", "shm-check")["status"].get("phase")
                          == "Running", timeout=120)
    finally:
        if forward:
            forward.terminate()
            forward.wait(10)
        node.kubectl("delete", "pod", "shm-check", "--ignore-not-found", "--wait=false", check=False)
    def out(prefix):
        return next(v for k, v in outputs.items() if k.startswith(prefix))

    assert re.search(r"Phase:\s+Succeeded", out("helm test shmguard"))
    # Both replicas, on the node's bridge, behind the Service.
    # (1.37 lists the Service's two ports mixed, "10.213.0.95:9090,10.213.0.96:9090,10.213.0.95:8443 + 1 more...")
    eps = out("kubectl -n shmguard get endpoints")
    assert len(set(re.findall(r"(10\.213\.0\.\d+):\d+", eps))) == 2 and re.search(r"10\.213\.0\.\d+:8443", eps), eps
    assert out("kubectl create --dry-run=server").strip() == "8Gi"
    # The review through kubectl port-forward (API server -> kubelet -> the pod), TLS verified.
    review = out("shmguard review --server")
    assert "inject" in review and "shmguard-dshm" in review, review
    df = out("kubectl exec shm-check")
    assert re.search(r"^tmpfs\s+1\.0G\s.*/dev/shm$", df, re.M), f"README says 1.0G; df printed:\n{df}"
    assert out("kubectl get pod shm-check").startswith("batch 32 x 1Mi"), out("kubectl get pod shm-check")
