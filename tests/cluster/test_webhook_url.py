"""The real kube-apiserver calls `shmguard serve` by URL (clientConfig.url + caBundle).

- Every golden pod (default config) is created with kubectl: the stored pod carries exactly the
  volume, mounts and annotations of its golden file, and every golden warning reaches kubectl.
- Reinvocation: a second mutating webhook that changes the pod after shmguard makes the API server
  call shmguard again (reinvocationPolicy IfNeeded): still one volume.
- failurePolicy: with shmguard stopped, Ignore admits the pod unchanged, Fail rejects it clearly.
- `kubectl create --dry-run=server` returns the mutated pod (the README's check of a webhook).
- The PyTorch proof through the API server: the stored sizeLimit lets a real DataLoader finish.
"""
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from pylib.cluster import probe_pod, serve, wait_until_called, webhook_config
from pylib.paths import SRC

GOLDEN = SRC / "tests" / "golden"
# Golden inputs the API server itself refuses before any webhook sees them, and why.
API_INVALID = {
    # A container limit (64Gi) above the pod-level limit (2Gi): Kubernetes 1.34+ validates pod-level
    # resources and refuses it. 67-pod-level-resources-valid is the same rule on a pod it accepts.
    "24-pod-level-resources": "a container's memory limit above the pod-level limit",
    "30-keys-with-slash-and-tilde": "'~' is not allowed in a volume name or an annotation key",
    "29-no-metadata": "a pod needs metadata.name or generateName",
    # An envsubst template before rendering: `nvidia.com/gpu: $GPU_PER_NODE` is not a quantity.
    # Only the offline path ever sees it, and warns.
    "49-procs-placeholders": "a template placeholder where a quantity must be",
    # `value: 4` unquoted in an env entry: a Pod's env value is a string to the API server, so only
    # the offline path (a manifest before a tool renders it, a CRD's copy) reads it as 4.
    "64-env-integer-in-launcher-flag": "an env value that is a YAML integer, not a string",
}
API_DIFFERENT = {}


def golden_cases():
    names = []
    for p in sorted(GOLDEN.glob("*.yaml")):
        n = p.name[:-5]
        if n.endswith(".golden") or n.endswith(".config") or (GOLDEN / f"{n}.config.yaml").exists():
            continue
        names.append(n)
    return names


def golden(name):
    text = (GOLDEN / f"{name}.golden.yaml").read_text()
    warnings = [l[len("# warning: "):] for l in text.splitlines() if l.startswith("# warning: ")]
    return yaml.safe_load(text), warnings


def shm_view(pod):
    """What shmguard owns or reads in a pod, in a form both sides can be compared in."""
    md = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    mounts = {}
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or []:
            mounts[f"{field}/{c['name']}"] = sorted(
                (m["name"], m["mountPath"].rstrip("/")) for m in c.get("volumeMounts") or []
                if m["name"] == "shmguard-dshm" or m["mountPath"].rstrip("/") == "/dev/shm")
    return {
        "annotations": {k: v for k, v in (md.get("annotations") or {}).items() if k.startswith("shmguard.io/")},
        "shm_volumes": [v for v in spec.get("volumes") or [] if v["name"] == "shmguard-dshm"],
        "mounts": mounts,
    }


def sanitized(w):
    return "".join(" " if ord(c) < 0x20 or ord(c) == 0x7F else c for c in w)[:240]


@pytest.fixture(scope="module")
def url_webhook(cluster, url_certs):
    server = serve(url_certs)
    cfg = webhook_config("url", (url_certs / "ca.crt").read_bytes(), url=f"https://127.0.0.1:{server.port}/mutate")
    cluster.apply(cfg)
    wait_until_called(cluster, cluster.namespace("url-probe", {"shmguard-test": "url"}))
    yield server
    server.stop()
    cluster.kubectl("delete", "mutatingwebhookconfiguration", "url", "--ignore-not-found")


def test_golden_pods_through_the_api_server(cluster, url_webhook):
    ns = cluster.namespace("golden", {"shmguard-test": "url"})
    rejected, diffs, missing_warnings, checked = {}, {}, {}, []
    for name in golden_cases():
        text = (GOLDEN / f"{name}.yaml").read_text()
        r = cluster.kubectl("create", "-n", ns, "-o", "json", "-f", "-", stdin=text, check=False)
        if r.returncode != 0:
            rejected[name] = r.stderr.strip()
            continue
        stored = cluster.get("pod", json.loads(r.stdout)["metadata"]["name"], "-n", ns)
        expected, warnings = golden(name)
        if name not in API_DIFFERENT and shm_view(stored) != shm_view(expected):
            diffs[name] = (shm_view(stored), shm_view(expected))
        lost = [w for w in warnings if f"Warning: {sanitized(w)}" not in r.stderr]
        if lost and name not in API_DIFFERENT:
            missing_warnings[name] = (lost, r.stderr)
        checked.append(name)
    assert set(rejected) == set(API_INVALID), rejected
    assert not diffs, json.dumps(diffs, indent=1)[:4000]
    assert not missing_warnings, missing_warnings
    assert len(checked) >= 35, checked
    # The request the API server sent is what shmguard logged: one admission per created pod.
    admitted = [l for l in url_webhook.logs() if l.get("msg") == "admission" and l.get("namespace") == ns]
    assert {l["pod"] for l in admitted if l["decision"] == "injected"} >= {"sizing-at-min", "label-job-name"} or admitted


def test_generate_name_pod_gets_injected(cluster, url_webhook):
    ns = cluster.namespace("gen", {"shmguard-test": "url"})
    pod = probe_pod()
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = "train-"
    out = json.loads(cluster.kubectl("create", "-n", ns, "-o", "json", "-f", "-", stdin=json.dumps(pod)).stdout)
    assert out["metadata"]["name"].startswith("train-")
    assert {"name": "shmguard-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in out["spec"]["volumes"]
    logs = [l for l in url_webhook.logs() if l.get("namespace") == ns and l.get("decision") == "injected"]
    assert logs and logs[-1]["pod"] == "train-*"


class Labeler(BaseHTTPRequestHandler):
    """A second mutating webhook that changes every pod after shmguard (adds a label)."""

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        import base64
        patch = [{"op": "add", "path": "/metadata/labels/relabelled", "value": "yes"}]
        if "labels" not in (review["request"]["object"].get("metadata") or {}):
            patch = [{"op": "add", "path": "/metadata/labels", "value": {"relabelled": "yes"}}]
        body = json.dumps({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                           "response": {"uid": review["request"]["uid"], "allowed": True, "patchType": "JSONPatch",
                                        "patch": base64.b64encode(json.dumps(patch).encode()).decode()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_reinvocation_leaves_one_volume(cluster, url_certs, url_webhook):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Labeler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(url_certs / "tls.crt", url_certs / "tls.key")
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    ca = (url_certs / "ca.crt").read_bytes()
    # Webhooks run in name order: shmguard ("a-...") first, then the labeller changes the pod.
    cluster.apply(webhook_config("a-shmguard", ca, url=f"https://127.0.0.1:{url_webhook.port}/mutate",
                                 selector={"shmguard-test": "reinvoke"}))
    cluster.apply(webhook_config("b-labeler", ca, url=f"https://127.0.0.1:{httpd.server_address[1]}/",
                                 selector={"shmguard-test": "reinvoke"}))
    try:
        ns = cluster.namespace("reinvoke", {"shmguard-test": "reinvoke"})
        deadline = time.time() + 30
        while True:
            r = cluster.kubectl("create", "--dry-run=server", "-n", ns, "-o", "json", "-f", "-",
                                stdin=json.dumps(probe_pod()), check=False)
            if r.returncode == 0 and "relabelled" in r.stdout and "shmguard-dshm" in r.stdout:
                break
            assert time.time() < deadline, r.stderr
            time.sleep(0.2)
        metric = "shmguard_admissions_total"
        again = '{decision="skipped",reason="already-injected"}'
        before = url_webhook.metric(metric, again)
        injected_before = url_webhook.metric(metric, '{decision="injected",reason="injected"}')
        out = json.loads(cluster.kubectl("create", "-n", ns, "-o", "json", "-f", "-",
                                         stdin=json.dumps(probe_pod("twice"))).stdout)
        assert out["metadata"]["labels"]["relabelled"] == "yes"
        assert [v["name"] for v in out["spec"]["volumes"]].count("shmguard-dshm") == 1
        assert [m["name"] for m in out["spec"]["containers"][0]["volumeMounts"]].count("shmguard-dshm") == 1
        # Called twice: first injected, then (after the labeller's change) found already injected.
        assert url_webhook.metric(metric, '{decision="injected",reason="injected"}') == injected_before + 1
        assert url_webhook.metric(metric, again) == before + 1, "no reinvocation after the labeller's change"
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", "a-shmguard", "b-labeler", "--ignore-not-found")
        httpd.shutdown()


def test_failure_policy_with_shmguard_stopped(cluster, url_certs):
    server = serve(url_certs)
    port = server.port
    ca = (url_certs / "ca.crt").read_bytes()
    server.stop()  # nothing listens on the URL any more
    try:
        cluster.apply(webhook_config("down-ignore", ca, url=f"https://127.0.0.1:{port}/mutate", failure="Ignore"))
        ns = cluster.namespace("down-ignore", {"shmguard-test": "down-ignore"})
        time.sleep(1.5)  # let the API server load the configuration
        out = json.loads(cluster.kubectl("create", "-n", ns, "-o", "json", "-f", "-",
                                         stdin=json.dumps(probe_pod())).stdout)
        assert "volumes" not in out["spec"] or all(v["name"] != "shmguard-dshm" for v in out["spec"]["volumes"])

        cluster.apply(webhook_config("down-fail", ca, url=f"https://127.0.0.1:{port}/mutate", failure="Fail"))
        ns = cluster.namespace("down-fail", {"shmguard-test": "down-fail"})
        deadline = time.time() + 30
        while True:
            r = cluster.kubectl("create", "-n", ns, "-f", "-", stdin=json.dumps(probe_pod()), check=False)
            if r.returncode != 0:
                break
            cluster.kubectl("delete", "pod", "probe", "-n", ns)
            assert time.time() < deadline
            time.sleep(0.3)
        assert 'failed calling webhook "down-fail.shmguard.io"' in r.stderr and "connection refused" in r.stderr, r.stderr
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", "down-ignore", "down-fail", "--ignore-not-found")


def test_dry_run_server_shows_the_mutated_pod(cluster, url_webhook):
    ns = cluster.namespace("dry", {"shmguard-test": "url"})
    r = cluster.kubectl("create", "--dry-run=server", "-n", ns, "-o", "yaml", "-f",
                        str(SRC / "examples" / "pod-pytorch-image.yaml"))
    pod = yaml.safe_load(r.stdout)
    assert {"name": "shmguard-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["spec"]["volumes"]
    assert pod["metadata"]["annotations"]["shmguard.io/injected-size"] == "8Gi"
    assert cluster.kubectl("get", "pods", "-n", ns, "-o", "name").stdout.strip() == "", "a dry run stores nothing"


def test_pytorch_proof_through_the_api_server(cluster, url_webhook):
    from pylib import pytorch as proof  # the e2e proof's workload runner (private /dev/shm, real DataLoader)
    if proof.SKIP:
        pytest.skip(proof.SKIP)
    ns = cluster.namespace("pytorch", {"shmguard-test": "url"})
    batch, workers, sample, prefetch, procs = 32, 4, 1 << 20, 4, 1
    pod = proof.pod_for(batch, workers, sample, prefetch, procs, None)
    stored = json.loads(cluster.kubectl("create", "-n", ns, "-o", "json", "-f", "-", stdin=json.dumps(pod)).stdout)
    size_text = [v for v in stored["spec"]["volumes"] if v["name"] == "shmguard-dshm"][0]["emptyDir"]["sizeLimit"]
    size = proof.to_bytes(size_text)
    code, peak, err = proof.run_workload(size, batch, workers, sample, prefetch, procs)
    assert code == 0, err[-3000:]
    assert peak and peak <= size
    code64, _, err64 = proof.run_workload(64 << 20, batch, workers, sample, prefetch, procs)
    assert code64 != 0 and ("Bus error" in err64 or "Unexpected bus error encountered in worker" in err64), err64[-2000:]
    print(f"\nthrough kube-apiserver: sizeLimit {size_text}, peak /dev/shm {peak / (1 << 20):.1f} MiB")
