"""How full a pod's /dev/shm is, measured on the real node, whose kubelet is reached as in a real
cluster (webhook authentication and authorization, anonymous off, on the node's bridge address):

- the chart's monitor (`helm upgrade --set monitor.enabled=true --wait`) reads the kubelet with its
  service account token (nodes/stats only) and verifies its serving certificate against the cluster
  CA; `helm test` runs its check pod;
- `shmguard top` reads the same kubelet through the API server's node proxy;
- a real DataLoader holds its peak ((W x P + 1) batches) in the /dev/shm shmguard injected: top's
  and the monitor's figures agree with the pod's own statvfs, while the kubelet's usedBytes (a `du`
  walk) reads about 0, since PyTorch unlinks its segments;
- a pod filled past 90% gets the Event; a user without nodes/proxy is told so; a node whose kubelet
  does not answer is named and the others are still shown."""
import json
import re
import socket
import subprocess
import sys
import time

import pytest

from pylib.cluster import sa_kubeconfig
from pylib.node import NAMESPACE, TRAINING_IMAGE
from pylib.paths import BIN, SRC

MiB = 1 << 20
BATCH, WORKERS, PREFETCH, SAMPLE = 16, 2, 2, 4 * MiB
EXPECTED_PEAK = (WORKERS * PREFETCH + 1) * BATCH * SAMPLE  # 320 MiB
# Steps slower than the kubelet's volume stats period (1m): the queue stays full that long.
WORKLOAD = f"--batch-size {BATCH} --num-workers {WORKERS} --sample-size {SAMPLE} --steps 4 --step-seconds 50"
STATVFS = "import os; s = os.statvfs('/dev/shm'); print((s.f_blocks - s.f_bfree) * s.f_frsize)"
FILL = ("import os, time\n"
        "fd = os.open('/dev/shm/fill', os.O_CREAT | os.O_RDWR)\n"
        "for _ in range(950): os.write(fd, b'x' * (1 << 20))\n"
        "os.unlink('/dev/shm/fill')\n"
        "print('filled', flush=True)\n"
        "time.sleep(600)\n")
MONITOR_SERVICE = "shmguard-monitor"  # the chart's, for the release README installs
NODE = "shmguard-node"
GHOST = "shmguard-ghost"  # a Node object whose kubelet port answers nothing


def pod(name, command, size="1Gi"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"shmguard.io/size": size}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [{
                "name": "train", "image": TRAINING_IMAGE, "imagePullPolicy": "Never", "command": command}]}}


def metric(text, name, pod_name):
    m = re.search(name + r'\{namespace="[^"]*",pod="' + pod_name + r'",[^}]*\} (\d+)', text)
    return int(m.group(1)) if m else None


def monitor_metrics(node):
    """The in-cluster monitor's /metrics, through the API server's service proxy."""
    r = node.kubectl("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/services/http:{MONITOR_SERVICE}:metrics/proxy/metrics",
                     check=False)
    return r.stdout if r.returncode == 0 else ""


def kubelet_summary(node):
    """The real kubelet's Summary API through the node proxy (the API server's kubelet client
    certificate, authorized by the kubelet's SubjectAccessReview)."""
    return json.loads(node.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/stats/summary").stdout)


def top(node, *args, kubeconfig=None):
    env = dict(node.env)
    if kubeconfig:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([BIN, "top", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def monitored(release):
    """The chart's monitor turned on in README's release, as an admin does, and off again after."""
    t0 = time.time()
    release.helm("upgrade", "shmguard", str(SRC / "charts" / "shmguard"), "-n", NAMESPACE, "--reuse-values", "--set",
                 "monitor.enabled=true,monitor.period=5s", "--wait", "--timeout", "180s", timeout=300)
    sys.stderr.write(f"shm usage: helm upgrade --set monitor.enabled=true --wait took {time.time() - t0:.1f}s\n")
    try:
        yield release
    finally:
        release.helm("upgrade", "shmguard", str(SRC / "charts" / "shmguard"), "-n", NAMESPACE, "--reuse-values", "--set",
                     "monitor.enabled=false", "--wait", "--timeout", "180s", timeout=300, check=False)


def test_top_and_the_monitor_agree_with_the_pods_statvfs_on_the_real_kubelet(monitored):
    node = monitored
    ns = node.namespace("shm-usage")
    node.apply(pod("dl", ["python3", "/opt/shmguard/dataloader_workload.py", *WORKLOAD.split()]), "-n", ns)
    node.apply(pod("fill", ["python3", "-c", FILL]), "-n", ns)
    try:
        # The kubelet measures volumes once a minute (its volume stats period, top's `measuredAt`):
        # a figure taken while the workers were still filling the queue stays that long, so wait
        # for one taken at the plateau ((W x P + 1) batches, within 2%).
        def loaded():
            text = monitor_metrics(node)
            used = metric(text, "shmguard_shm_used_bytes", "dl")
            return text if used and used >= 0.98 * EXPECTED_PEAK else None
        t0 = time.time()
        text = node.wait("the monitor sees dl's DataLoader peak", loaded, timeout=300, every=2)
        waited = time.time() - t0
        # top through the node proxy and the pod's own statvfs, at the same moment (twice each, the
        # queue moves): the closest pair agrees within 2%.
        own, tops = [], []
        for _ in range(2):
            r = top(node, "-n", ns, "-o", "json")
            assert r.returncode == 0, r.stderr
            tops.append(next(i for i in json.loads(r.stdout)["items"] if i["pod"] == "dl"))
            own.append(int(node.kubectl("exec", "-n", ns, "dl", "--", "python3", "-c", STATVFS).stdout))
        used = metric(text, "shmguard_shm_used_bytes", "dl")
        size = metric(text, "shmguard_shm_size_bytes", "dl")
        peak = metric(text, "shmguard_shm_peak_bytes", "dl")
        vol = next(v for p in kubelet_summary(node)["pods"] if p["podRef"]["name"] == "dl" and p["podRef"]["namespace"] == ns
                   for v in p.get("volume", []) if v["name"] == "shmguard-dshm")
        sys.stderr.write(f"shm usage: monitor used {used} peak {peak} size {size}; top used "
                         f"{[t['usedBytes'] for t in tops]}; the pod's statvfs {own}; kubelet usedBytes "
                         f"{vol.get('usedBytes')}, capacity-available {vol['capacityBytes'] - vol['availableBytes']}; "
                         f"expected peak {EXPECTED_PEAK}; {waited:.0f}s until the monitor reported it\n")
        assert size == 1 << 30
        assert min(abs(t["usedBytes"] - o) for t in tops for o in own) <= 0.02 * max(own), (tops, own)
        assert min(abs(used - o) for o in own) <= 0.02 * used, (used, own)
        assert abs(peak - EXPECTED_PEAK) <= 0.05 * EXPECTED_PEAK, (peak, EXPECTED_PEAK)
        assert vol["usedBytes"] < 1 * MiB  # the `du` walk finds the unlinked segments' 0 bytes
        assert all(t["kubeletUsedBytes"] < 1 * MiB and t["mountedBytes"] == 1 << 30 for t in tops), tops
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", t["measuredAt"]) for t in tops), tops
        # The pod past 90% gets one Warning Event with the suggestion; the DataLoader's pod none.
        events = node.wait("the ShmNearlyFull event", lambda: [
            e for e in node.get("events", "-n", ns)["items"] if e["reason"] == "ShmNearlyFull"] or None,
            timeout=180, every=2)
        assert [e["involvedObject"]["name"] for e in events] == ["fill"]
        assert "full" in events[0]["message"] and "shmguard.io/size:" in events[0]["message"]
        assert events[0]["source"]["component"] == "shmguard-monitor"
        assert "ShmNearlyFull" in node.kubectl("describe", "pod", "fill", "-n", ns).stdout
        # helm test: the webhook's check and the monitor's, whose pod waits for its own /dev/shm
        # to be reported (the monitor's token authorized by this kubelet, its certificate verified).
        t1 = time.time()
        r = node.helm("test", "shmguard", "-n", NAMESPACE, "--timeout", "5m", timeout=400)
        sys.stderr.write(f"shm usage: helm test with the monitor took {time.time() - t1:.0f}s\n")
        for suite in ("shmguard-test", "shmguard-monitor-test"):
            assert re.search(rf"TEST SUITE:\s+{suite}\n(.*\n)*?Phase:\s+Succeeded\n", r.stdout), r.stdout
        logs = node.kubectl("logs", "-n", NAMESPACE, f"deploy/{MONITOR_SERVICE}").stderr + \
            node.kubectl("logs", "-n", NAMESPACE, f"deploy/{MONITOR_SERVICE}").stdout
        assert f"node {NODE}:" not in logs, logs[-3000:]  # never refused by the kubelet
    finally:
        node.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_top_names_a_missing_permission_and_a_node_that_does_not_answer(release, tmp_path):
    node = release
    ns = node.namespace("shm-top")
    shm = {"volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    here = pod("here", ["sleep", "600"])
    here["metadata"]["labels"] = {"shmguard.io/inject": "false"}
    here["spec"]["containers"][0].update(shm)
    here["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Mi"}}]
    node.apply(here, "-n", ns)
    # The ghost: a Node whose kubelet endpoint is a port on the bridge address where nothing
    # listens, and a pod bound to it that the API server is told runs.
    with socket.socket() as s:
        s.bind(("10.213.0.1", 0))
        dead_port = s.getsockname()[1]
    node.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": GHOST}})
    node.kubectl("patch", "node", GHOST, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"addresses": [{"type": "InternalIP", "address": "10.213.0.1"}],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": dead_port}}}}))
    away = json.loads(json.dumps(here))
    away["metadata"]["name"] = "away"
    away["spec"]["nodeName"] = GHOST
    node.apply(away, "-n", ns)
    node.kubectl("patch", "pod", "away", "-n", ns, "--subresource=status", "--type=merge",
                 "-p", json.dumps({"status": {"phase": "Running"}}))
    try:
        node.wait("pod here running", lambda: node.get("pod", "here", "-n", ns)["status"].get("phase") == "Running")

        def reported():  # the kubelet reports a volume up to a minute after the pod starts
            r = top(node, "-n", ns, "-o", "json")
            items = {i["pod"]: i for i in json.loads(r.stdout)["items"]} if r.stdout else {}
            return (r, items) if items.get("here", {}).get("mountedBytes") else None
        r, items = node.wait("top's figures for the pod on the real node", reported, timeout=150, every=3)
        assert r.returncode == 1, r.stderr  # a node gave no figures
        assert items["here"]["mountedBytes"] == 256 * MiB and items["here"]["verdict"] != "no stats yet"
        assert items["away"]["usedBytes"] is None and items["away"]["verdict"] == "no stats yet"
        assert [n["node"] for n in json.loads(r.stdout)["failedNodes"]] == [GHOST]
        assert f"node {GHOST}:" in r.stderr and "its pods have no figures" in r.stderr, r.stderr
        assert f"node {NODE}:" not in r.stderr, r.stderr
        # A user who may list pods but not reach the nodes is told which permission is missing.
        cfg = sa_kubeconfig(node, tmp_path, ns)
        r = top(node, "-n", ns, kubeconfig=cfg)
        assert r.returncode == 1 and "needs `get nodes/proxy`" in r.stderr and f"node {NODE}:" in r.stderr, r.stderr
        r = top(node, "-A", kubeconfig=cfg)
        assert r.returncode == 2 and "cannot list pods" in r.stderr and "in every namespace (-A)" in r.stderr, r.stderr
    finally:
        node.kubectl("delete", "pod", "away", "-n", ns, "--grace-period=0", "--force", check=False)
        node.kubectl("delete", "node", GHOST, "--wait=false", check=False)
        node.kubectl("delete", "namespace", ns, "--wait=false", check=False)
