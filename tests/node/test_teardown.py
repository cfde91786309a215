"""`hack/cluster.sh down` leaves nothing of the node behind, even when the API server is gone first:
no process (kubelet, containerd, shims, the pods' own processes), no mount, netns, veth, bridge,
iptables rule, kubepods cgroup, CNI state or directory that `up` made. Runs last (conftest orders
it): it stops the session's node."""
import subprocess
import time

from conftest import HACK, pod_json, host_state


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
