"""The chart on a real node: both replicas become Ready because the kubelet runs their probes, the
Endpoints controller puts them behind the Service, the API server calls the webhook through the
Service's ClusterIP (kube-proxy's rules), and `helm test` runs its pod on the node, which resolves
the Service's DNS name through CoreDNS."""
import json
import re

from pylib.node import NAMESPACE, pod_json, shm_volume
from pylib.paths import SRC


def test_both_replicas_ready_behind_the_service(release):
    d = release.get("deployment", "shmguard", "-n", NAMESPACE)
    assert d["status"].get("readyReplicas") == 2, d["status"]
    pods = release.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=shmguard")["items"]
    assert len(pods) == 2
    for p in pods:
        assert p["status"]["phase"] == "Running"
        assert all(c["ready"] for c in p["status"]["containerStatuses"]), p["status"]
    ips = sorted(p["status"]["podIP"] for p in pods)
    ep = release.get("endpoints", "shmguard", "-n", NAMESPACE)
    assert sorted(a["ip"] for s in ep["subsets"] for a in s["addresses"]) == ips
    assert all(ip.startswith("10.213.0.") for ip in ips), ips  # the node's own bridge


def test_the_api_server_calls_the_webhook_through_the_service(release):
    svc = release.get("service", "shmguard", "-n", NAMESPACE)
    assert svc["spec"]["clusterIP"].startswith("10.0.0.")
    r = release.kubectl("create", "--dry-run=server", "-f", str(SRC / "examples" / "pod-pytorch-image.yaml"),
                        "-o", "json")
    pod = json.loads(r.stdout)
    assert shm_volume(pod)["emptyDir"]["sizeLimit"] == "8Gi"
    # A pod that is not a training pod is left alone.
    r = release.kubectl("create", "--dry-run=server", "-f", "-", "-o", "json",
                        stdin=json.dumps(pod_json("web", image="nginx:1.27")))
    assert shm_volume(json.loads(r.stdout)) is None


def test_helm_test_passes_on_the_node(release):
    # The test pod is deleted once it succeeds (hook-delete-policy): its verdict is the phase.
    r = release.helm("test", "shmguard", "-n", NAMESPACE, timeout=240)
    assert re.search(r"TEST SUITE:\s+shmguard-test\n(.*\n)*?Phase:\s+Succeeded\n", r.stdout), r.stdout
