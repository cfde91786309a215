"""The host has room for one node: one bridge, one set of KUBE-* chains, one kubepods cgroup tree.
A second `hack/cluster.sh up --node` waits for the node that runs; when it gives up it says which
node holds the host and how to bring it down, and its own clean-up leaves that node alone (a CI run
once failed on a bridge left by another run, and its `down` then took that node's bridge away)."""
import subprocess
import time
from pathlib import Path

from pylib.node import node_up
from pylib.paths import HACK

CLAIM = Path("/run/shmguard-node.owner")


def bridge_index():
    """The bridge's interface index: the same device while it lives (its MAC address is not: a
    Linux bridge takes its ports' lowest, and pods come and go)."""
    path = Path("/sys/class/net/shmguard0/ifindex")
    return path.read_text().strip() if path.exists() else ""


def test_a_second_node_waits_then_leaves_the_first_alone(node, tmp_path):
    assert CLAIM.read_text().strip() == f"{node.dir}/node"
    bridge = bridge_index()
    assert bridge
    t0 = time.time()
    r, env = node_up(tmp_path / "second", SHMGUARD_NODE_WAIT="6")
    took = time.time() - t0
    subprocess.run([str(HACK / "cluster.sh"), "down"], env=env, capture_output=True, timeout=300)
    assert r.returncode != 0, r.stderr
    assert f"waiting for the node of {node.dir}/node to go down" in r.stderr, r.stderr
    assert f"the node of {node.dir}/node still runs on this host; bring it down first: " \
           f"CLUSTER_DIR={node.dir} hack/cluster.sh down" in r.stderr, r.stderr
    assert took >= 6, f"gave up after {took:.1f}s, before SHMGUARD_NODE_WAIT"
    # The first node keeps the host: its claim, its bridge, its forward rule, and it still runs pods.
    assert CLAIM.read_text().strip() == f"{node.dir}/node"
    assert bridge_index() == bridge, "the first node's bridge was deleted or made again"
    assert "shmguard-node" in subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True).stdout
    ready = node.get("node", "shmguard-node")["status"]["conditions"]
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in ready), ready
    assert not (tmp_path / "second" / "node").exists()
