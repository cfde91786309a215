"""Tests against a real kube-apiserver: hack/cluster.sh starts etcd and kube-apiserver (built by
hack/testbin.sh) for the session and always stops them. `shmguard serve` runs on the host; the
tests play the kubelet's part only where a pod would have to run."""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import importlib.util

# The e2e suite's helpers (Server, certificates, reviews) under their own module name; re-exported
# here so e2e modules imported by these tests (test_pytorch's workload runner) find them too.
_E2E = Path(__file__).resolve().parents[1] / "e2e"
sys.path.insert(0, str(_E2E))
_spec = importlib.util.spec_from_file_location("e2e_conftest", _E2E / "conftest.py")
e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(e2e)
BIN, SRC, Server, gen_certs, review, decode_patch = e2e.BIN, e2e.SRC, e2e.Server, e2e.gen_certs, e2e.review, e2e.decode_patch
training_pod, SERVICE_DNS = e2e.training_pod, e2e.SERVICE_DNS

HACK = SRC / "hack"


class Cluster:
    def __init__(self, env):
        self.env = env
        self.bindir = Path(env["SHMGUARD_TESTBIN"])

    def kubectl(self, *args, stdin=None, check=True, timeout=60):
        r = subprocess.run([str(self.bindir / "kubectl"), *args], input=stdin, capture_output=True, text=True,
                           env=self.env, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{r.stderr}")
        return r

    def helm(self, *args, check=True, timeout=120):
        r = subprocess.run([str(self.bindir / "helm"), *args], capture_output=True, text=True, env=self.env,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
        return r

    def apply(self, obj, *args):
        return self.kubectl("apply", "-f", "-", *args, stdin=json.dumps(obj))

    def get(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def namespace(self, name, labels=None):
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}})
        return name


def cluster_up(cluster_dir, *args):
    """`hack/cluster.sh up ARGS` in CLUSTER_DIR; the environment its exports set up. On failure it is
    brought down again and the error says why."""
    env = dict(os.environ, CLUSTER_DIR=str(cluster_dir))
    r = subprocess.run([str(HACK / "cluster.sh"), "up", *args], capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode != 0:
        subprocess.run([str(HACK / "cluster.sh"), "down"], env=env, capture_output=True, timeout=300)
        raise RuntimeError(f"hack/cluster.sh up {' '.join(args)} failed:\n" + r.stderr)
    sys.stderr.write(r.stderr)
    for part in r.stdout.split("export ", 1)[1].split():
        k, v = part.split("=", 1)
        env[k] = v.replace("$PATH", os.environ["PATH"])
    return env


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


def webhook_config(name, ca_pem, url=None, service=None, failure="Fail", selector=None, path="/mutate"):
    client = {"caBundle": base64.b64encode(ca_pem).decode()}
    if url:
        client["url"] = url
    if service:
        client["service"] = {"namespace": service[0], "name": service[1], "path": path, "port": 443}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{name}.shmguard.io",
            "clientConfig": client,
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "failurePolicy": failure,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1", "v1beta1"],
            "reinvocationPolicy": "IfNeeded",
            "timeoutSeconds": 5,
            "namespaceSelector": {"matchLabels": selector or {"shmguard-test": name}},
        }],
    }


@pytest.fixture(scope="session")
def url_certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("url-certs")
    subprocess.run([str(HACK / "gen-certs.sh"), str(d), "shmguard", "shmguard"], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, EXTRA_SANS="IP:127.0.0.1"))
    return d


def serve(certs, config=None):
    return Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt", config=config)
