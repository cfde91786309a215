"""A rollout under load. A client creates training pods through the API server at >= 20/s for 60 s
while `helm upgrade` changes a config value (both replicas roll) and one webhook pod is deleted.
Every created pod is counted as injected or missed, every refused create as refused. The chart's
webhook has failurePolicy Ignore: a call that fails admits the pod unchanged and says nothing, so
this count is the only place a miss shows. Goal: 0 missed, 0 refused.

The pods are real creates (stored in etcd, admitted by the real webhook) with a nodeSelector no node
has, so they stay Pending: the test loads the admission path, not the kubelet."""
import http.client
import json
import ssl
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import yaml

from pylib.node import IMAGE_VALUES, NAMESPACE, TRAINING_IMAGE, shm_volume
from pylib.paths import SRC

RATE = 25           # pods per second asked for
SECONDS = 60
UPGRADE_AT = 10     # s into the load
DELETE_AT = 40


class Client:
    """The admin's HTTPS connection to the API server, one per thread."""

    def __init__(self, kubeconfig):
        cfg = yaml.safe_load(open(kubeconfig))
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        u = urlparse(cluster["server"])
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        self.local = threading.local()

    def post(self, path, body):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()
        except (OSError, http.client.HTTPException) as e:
            self.local.conn = None
            return 0, str(e).encode()


def pod(i):
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"load-{i:05d}", "annotations": {
            "shmguard.io/batch-size": "32", "shmguard.io/num-workers": "4", "shmguard.io/sample-size": "1Mi"}},
        "spec": {"nodeSelector": {"shmguard.io/test-no-such-node": "true"},
                 "containers": [{"name": "train", "image": TRAINING_IMAGE, "command": ["sleep", "1"]}]},
    })


def test_rollout_under_load_misses_nothing(release):
    node = release
    ns = node.namespace("rollout-load")
    client = Client(node.env["KUBECONFIG"])
    results = []  # (second, status, injected)
    lock = threading.Lock()
    t0 = time.time()

    def create(i):
        status, body = client.post(f"/api/v1/namespaces/{ns}/pods", pod(i))
        injected = False
        if status == 201:
            injected = shm_volume(json.loads(body)) is not None
        with lock:
            results.append((time.time() - t0, status, injected, body[:300] if status != 201 else b""))

    events = {}

    def disrupt():
        time.sleep(UPGRADE_AT)
        events["upgrade_started"] = time.time() - t0
        node.helm("upgrade", "shmguard", str(SRC / "charts" / "shmguard"), "-n", NAMESPACE, "--reuse-values",
                  *IMAGE_VALUES, "--set", "config.sizing.headroom=1.6", "--wait", "--timeout", "120s", timeout=180)
        events["upgrade_done"] = time.time() - t0
        time.sleep(max(0.0, DELETE_AT - (time.time() - t0)))
        victim = node.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=shmguard")["items"][0]
        events["deleted"] = time.time() - t0
        node.kubectl("delete", "pod", "-n", NAMESPACE, victim["metadata"]["name"], "--wait=false")

    before = {p["metadata"]["name"] for p in
              node.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=shmguard")["items"]}
    disruptor = threading.Thread(target=disrupt)
    disruptor.start()
    with ThreadPoolExecutor(max_workers=16) as pool:
        n = RATE * SECONDS
        for i in range(n):
            delay = t0 + i / RATE - time.time()
            if delay > 0:
                time.sleep(delay)
            pool.submit(create, i)
    disruptor.join()
    elapsed = time.time() - t0

    created = [r for r in results if r[1] == 201]
    injected = [r for r in created if r[2]]
    missed = [r for r in created if not r[2]]
    refused = [r for r in results if r[1] != 201]
    after = {p["metadata"]["name"] for p in
             node.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=shmguard")["items"]}
    report = (f"rollout under load: {len(results)} creates in {elapsed:.1f}s ({len(results) / elapsed:.1f}/s): "
              f"{len(created)} created, {len(injected)} injected, {len(missed)} missed, {len(refused)} refused; "
              f"upgrade {events.get('upgrade_started', 0):.0f}-{events.get('upgrade_done', 0):.0f}s, "
              f"pod deleted at {events.get('deleted', 0):.0f}s; webhook pods {sorted(before)} -> {sorted(after)}")
    sys.stderr.write(report + "\n")
    if missed:
        sys.stderr.write(f"missed at seconds: {[round(r[0], 1) for r in missed][:50]}\n")
    if refused:
        sys.stderr.write(f"refused: {[(round(r[0], 1), r[1], r[3]) for r in refused][:10]}\n")
    node.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    assert len(results) / elapsed >= 20, report
    assert not before & after, f"both replicas should have rolled: {report}"
    assert not missed and not refused, report
