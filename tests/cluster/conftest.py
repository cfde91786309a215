"""Tests against a real kube-apiserver: hack/cluster.sh starts etcd and kube-apiserver (built by
hack/testbin.sh) for the session and always stops them. `shmguard serve` runs on the host; the
tests play the kubelet's part only where a pod would have to run."""
import os
import subprocess
import time

import pytest

from pylib.cluster import Cluster, cluster_up
from pylib.paths import HACK


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    t0 = time.time()
    env = cluster_up(d / "cp")
    c = Cluster(env)
    c.startup_seconds = time.time() - t0
    try:
        yield c
    finally:
        subprocess.run([str(HACK / "cluster.sh"), "down"], env=env, capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def url_certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("url-certs")
    subprocess.run([str(HACK / "gen-certs.sh"), str(d), "shmguard", "shmguard"], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, EXTRA_SANS="IP:127.0.0.1"))
    return d
