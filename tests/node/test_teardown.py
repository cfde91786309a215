"""`hack/cluster.sh down` leaves nothing of the node behind, even when the API server is gone first:
no process (kubelet, containerd, shims, the pods' own processes), no mount, netns, veth, bridge,
iptables rule, kubepods cgroup, CNI state or directory that `up` made. Runs last (conftest orders
it): it stops the session's node."""
import subprocess
import time
from pathlib import Path

from pylib.cluster import Cluster, cluster_up
from pylib.node import host_state, node_up, pod_json
from pylib.paths import HACK


def test_down_after_the_api_server_died_leaves_nothing(node):
    # A running pod whose process must not outlive `down`.
    node.apply(pod_json("survivor", command=["sleep", "3600"]), "-n", "default")
    node.wait("pod survivor running", lambda: node.get("pod", "survivor", "-n", "default")["status"]
              .get("phase") == "Running", timeout=120)
    during = host_state(node.dir)
    assert during["processes"], "the node's processes should be visible while it runs"
    assert any("sleep 3600" in p for p in during["processes"]), during["processes"]
    assert during["bridge"] and during["netns"] and during["mounts"]
    # The API server goes first, as when it crashed: the node must still go down.
    pid = int((node.dir / "apiserver.pid").read_text())
    subprocess.run(["kill", "-9", str(pid)], check=True)
    time.sleep(1)
    t0 = time.time()
    r = subprocess.run([str(HACK / "cluster.sh"), "down"], env=node.env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    took = time.time() - t0
    after = host_state(node.dir)
    left = {k: (node.host_before[k], after[k]) for k in after if after[k] != node.host_before[k]}
    assert not left, f"changed by up and not undone by down ({took:.0f}s): {left}"
    assert not node.dir.exists()


def test_up_clears_what_a_killed_node_left(node, tmp_path_factory):
    """A node killed instead of brought down (a lost session, a killed test run) leaves its bridge,
    rules, cgroups, a pod and its shim behind; the next `up --node` clears them and starts, and its
    `down` leaves the host as the session found it."""
    # Short dirs: containerd's socket paths must stay under 104 bytes.
    env = cluster_up(tmp_path_factory.mktemp("k") / "cp", "--node")
    killed = Path(env["CLUSTER_DIR"])
    k = Cluster(env)
    pod = pod_json("stale", image="shmguard.test/pause:1", command=["/pause"])
    k.apply(pod, "-n", "default")
    deadline = time.time() + 120
    while k.get("pod", "stale", "-n", "default")["status"].get("phase") != "Running":
        assert time.time() < deadline, "pod stale never ran"
        time.sleep(1)
    for f in killed.rglob("*.pid"):  # every process the scripts started; the shim and the pod stay
        subprocess.run(["kill", "-9", f.read_text().strip()])
    time.sleep(1)
    left = host_state(killed)
    assert left["processes"] and left["bridge"] and left["cgroups"] and left["netns"], left
    r, env2 = node_up(tmp_path_factory.mktemp("n") / "cp")
    try:
        assert r.returncode == 0, r.stderr
        assert f"clearing what the node of {killed}/node left on this host" in r.stderr, r.stderr
        assert not (killed / "node").exists()
        assert not host_state(killed)["processes"]
    finally:
        d = subprocess.run([str(HACK / "cluster.sh"), "down"], env=env2, capture_output=True, text=True, timeout=300)
    assert d.returncode == 0, d.stderr
    after = host_state(Path(env2["CLUSTER_DIR"]))
    changed = {k: (node.host_before[k], after[k]) for k in after if after[k] != node.host_before[k]}
    assert not changed, changed
