"""Tests on a real node: `hack/cluster.sh up --node` starts etcd, kube-apiserver, the controller
manager, the scheduler, containerd, the kubelet, kube-proxy and CoreDNS for the session, and always
stops them. Nothing plays the kubelet's part here: the chart's Deployment runs on the node behind
its Service, and Jobs run the real PyTorch DataLoader in the /dev/shm the kubelet mounts.

Images (nothing can be pulled): SHMGUARD_IMAGE (the Dockerfile's, built by hack/test.sh's image
stage; built here when missing) and the training image from hack/node/training.Dockerfile, which
Docker's layer cache keys by its inputs. The training image is also tagged with the PyTorch image
name README's `kubectl run shm-check` uses, so that command runs as written."""
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pylib.cluster import cluster_up
from pylib.node import (EARLY_NS, IMAGE, README_INSTALL, README_PYTORCH_IMAGE, TRAINING_IMAGE, Node,
                        build_images, helm_install, host_state, pod_json)
from pylib.paths import HACK
from pylib.readme_blocks import commands, section


@pytest.fixture(scope="session")
def node(tmp_path_factory):
    d = tmp_path_factory.mktemp("node")
    images_s = build_images()
    host_before = host_state(d / "cp")
    t0 = time.time()
    env = cluster_up(d / "cp", "--node")
    n = Node(env)
    n.dir = Path(env["CLUSTER_DIR"])
    n.host_before = host_before
    n.startup_seconds = time.time() - t0
    try:
        t1 = time.time()
        r = subprocess.run([str(HACK / "cluster.sh"), "load", IMAGE, TRAINING_IMAGE, README_PYTORCH_IMAGE],
                           capture_output=True, text=True, env=env, timeout=1200)
        assert r.returncode == 0, r.stderr
        sys.stderr.write(f"node: images built in {images_s:.0f}s, node up in {n.startup_seconds:.0f}s, "
                         f"images loaded in {time.time() - t1:.0f}s\n")
        yield n
    finally:
        subprocess.run([str(HACK / "cluster.sh"), "down"], env=env, capture_output=True, timeout=300)


def pytest_collection_modifyitems(items):
    """test_teardown stops the session's node: it runs last."""
    items.sort(key=lambda item: item.module.__name__ == "test_teardown")


@pytest.fixture(scope="session")
def before_install(node):
    """A training pod created before shmguard is installed, as on a cluster that ran jobs before it
    (test_missed_and_leftover finds it unprotected, `before-install`)."""
    assert not node.get("mutatingwebhookconfigurations")["items"]
    node.namespace(EARLY_NS)
    node.apply(pod_json("early", annotations={"shmguard.io/batch-size": "32", "shmguard.io/num-workers": "4",
                                              "shmguard.io/sample-size": "1Mi"},
                        labels={"training.kubeflow.org/job-name": "bert"}, command=["sleep", "3600"],
                        terminationGracePeriodSeconds=1), "-n", EARLY_NS)
    time.sleep(1.2)  # creationTimestamps have a second's grain
    return node


@pytest.fixture(scope="session")
def release(node, before_install):
    """README's default install (selfSigned) run as written, from the repository's top, with the local
    image and `--wait`. It waits for nothing else: `helm install --wait` returns once the chart's
    install check has seen a pod injected through the API server, and the tests start at once, as
    a user's next command would."""
    assert README_INSTALL in commands(section("Install with Helm"))
    r, node.install_seconds = helm_install(node)
    assert r.returncode == 0, f"{README_INSTALL} failed:\n{r.stdout}\n{r.stderr}"
    sys.stderr.write(f"node: README's helm install --wait returned in {node.install_seconds:.1f}s\n")
    yield node
