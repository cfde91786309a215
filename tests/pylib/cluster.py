"""A kube-apiserver from hack/cluster.sh (etcd and kube-apiserver from hack/testbin.sh; with
`--node` the whole node): kubectl and helm in its environment, webhook configurations, a service
account's kubeconfig, and the image run in Docker as a kubelet would run the chart's Deployment."""
import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

from pylib.paths import HACK
from pylib.webhook import Server

# The image hack/test.sh's image stage built ("" when none was).
IMAGE = os.environ.get("SHMGUARD_IMAGE", "")


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


def serve(certs, config=None):
    """`shmguard serve` with the certificates of `certs` (a gen_certs directory)."""
    return Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt", config=config)


def endpoints_for(cluster, ns, ip):
    """The chart's Service backed by `ip`, as the controllers would write it with no
    controller-manager running: the Endpoints (what `kubectl get endpoints` shows) and the
    EndpointSlice, which the API server's webhook service resolver reads on 1.37."""
    ports = [{"name": "https", "port": 8443}, {"name": "metrics", "port": 9090}]
    cluster.apply({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "shmguard", "namespace": ns},
                   "subsets": [{"addresses": [{"ip": ip}], "ports": ports}]})
    cluster.apply({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                   "metadata": {"name": "shmguard-test", "namespace": ns,
                                "labels": {"kubernetes.io/service-name": "shmguard"}},
                   "addressType": "IPv4", "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
                   "ports": [dict(p, protocol="TCP") for p in ports]})


def docker(*args, check=True, timeout=120):
    """`docker ARGS`: the CompletedProcess; with `check`, a failure raises with its output."""
    r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
    return r


def wait_ready(ip, port, deadline_s=20):
    t0 = time.time()
    while time.time() - t0 < deadline_s:
        try:
            with urllib.request.urlopen(f"http://{ip}:{port}/readyz", timeout=1) as resp:
                if resp.status == 200:
                    return time.time() - t0
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"the webhook at {ip}:{port} never became ready")


def files_from(cluster, ns, tmp_path):
    """The chart's Secret and ConfigMap as a kubelet would project them into the pod."""
    secret = cluster.get("secret", "shmguard-tls", "-n", ns)
    tls = tmp_path / "tls"
    tls.mkdir()
    for k, v in secret["data"].items():
        (tls / k).write_bytes(base64.b64decode(v))
        os.chmod(tls / k, 0o644)  # a Secret volume's default mode
    cfg = tmp_path / "config"
    cfg.mkdir()
    for k, v in cluster.get("configmap", "shmguard", "-n", ns)["data"].items():
        (cfg / k).write_text(v)
    os.chmod(tmp_path, 0o755)
    return tls, cfg


def probe_pod(name="probe"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"shmguard.io/inject": "true"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def wait_until_called(cluster, ns, want=True, deadline_s=30):
    """The API server picks up webhook configurations asynchronously: poll with server dry runs."""
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        r = cluster.kubectl("create", "--dry-run=server", "-n", ns, "-o", "json", "-f", "-",
                            stdin=json.dumps(probe_pod()), check=False)
        if r.returncode == 0 and ("shmguard-dshm" in r.stdout) == want:
            return
        time.sleep(0.2)
    raise AssertionError("the API server never called the webhook as expected")


def sa_kubeconfig(cluster, tmp_path, ns, node_proxy=False, exec_plugin=False):
    """A kubeconfig (tmp_path/kubeconfig) for a service account `viewer` that may list pods in `ns`
    and nothing else (with `node_proxy`, also get nodes/proxy), by token or by an exec plugin."""
    cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "viewer", "namespace": ns}})
    cluster.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "list-pods", "namespace": ns},
                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    cluster.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "list-pods", "namespace": ns},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "list-pods"},
                   "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": ns}]})
    cluster.kubectl("delete", "clusterrolebinding", "shmguard-top-test", "--ignore-not-found")
    if node_proxy:
        cluster.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": "shmguard-top-test"},
                       "rules": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}]})
        cluster.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": "shmguard-top-test"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "shmguard-top-test"},
                       "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": ns}]})
    token = cluster.kubectl("create", "token", "viewer", "-n", ns).stdout.strip()
    admin = yaml.safe_load(open(cluster.env["KUBECONFIG"]))
    user = {"token": token}
    if exec_plugin:
        plugin = tmp_path / "cred.sh"
        cred = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": token}}
        plugin.write_text("#!/bin/sh\n[ -n \"$KUBERNETES_EXEC_INFO\" ] || exit 3\ncat <<'EOF'\n" + json.dumps(cred) + "\nEOF\n")
        plugin.chmod(0o755)
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never"}}
    cfg = dict(admin, users=[{"name": "admin", "user": user}])
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return path
