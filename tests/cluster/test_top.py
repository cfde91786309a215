"""`shmguard top` against the real kube-apiserver: the user's kubeconfig (client certificate, a bearer
token, an exec credential plugin), the pod list, and each node's Summary API through the API
server's node proxy. The kubelets are played by a small HTTPS server on the project's own bridge
address (the API server refuses to proxy to a loopback node address); a second node points at a
port where nothing listens. The real kubelet is tests/node's part."""
import json
import os
import shutil
import ssl
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from pathlib import Path

from pylib.cluster import sa_kubeconfig
from pylib.paths import BIN, SRC as BIN_SRC

LINK, ADDR = "shmguard-fk0", "10.213.9.1"  # the project's own address range (hack/node uses 10.213.0.0/24)
MiB, GiB = 1 << 20, 1 << 30
KUBELET_CA = []  # the fake kubelet's CA, once the fleet is up
MEASURED_AT = "2026-12-07T10:00:00Z"  # when the fake kubelet says it took its volume figures

# Per pod: capacityBytes, availableBytes, usedBytes (a `du`: 0 for PyTorch's unlinked segments).
VOLUMES = {"full": (2 * GiB, 2 * GiB // 20, 0),         # 95% used
           "idle": (64 * GiB, 64 * GiB - 100 * MiB, 0),  # 100Mi of 64Gi
           "half": (2147483648, 1543421952, 0)}           # the figures measured on the test node


class FakeKubelet(BaseHTTPRequestHandler):
    pods = []  # (namespace, name, uid)

    def do_GET(self):  # noqa: N802
        if self.path != "/stats/summary":
            self.send_error(404)
            return
        body = {"node": {"nodeName": "fake-a"}, "pods": [
            {"podRef": {"namespace": ns, "name": name, "uid": uid},
             "volume": [{"name": "dshm", "capacityBytes": VOLUMES[name][0], "availableBytes": VOLUMES[name][1],
                         "usedBytes": VOLUMES[name][2], "time": MEASURED_AT}]} for ns, name, uid in self.pods]}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def fleet(cluster, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the fake kubelet's address needs root (a bridge of its own)")
    subprocess.run(["ip", "link", "del", LINK], capture_output=True)
    subprocess.run(["ip", "link", "add", LINK, "type", "bridge"], check=True)
    subprocess.run(["ip", "addr", "add", f"{ADDR}/32", "dev", LINK], check=True)
    subprocess.run(["ip", "link", "set", LINK, "up"], check=True)
    # A serving certificate for the fake kubelet's address, from a CA of its own (as a kubelet's).
    certs = tmp_path_factory.mktemp("kubelet")
    subprocess.run([str(BIN_SRC / "hack" / "gen-certs.sh"), str(certs), "fake-a", "node"], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, EXTRA_SANS=f"IP:{ADDR}"))
    KUBELET_CA[:] = [certs / "ca.crt"]
    server = ThreadingHTTPServer((ADDR, 0), FakeKubelet)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs / "tls.crt", certs / "tls.key")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dead_port = server.server_address[1] + 1 if server.server_address[1] < 65535 else 1
    for node, port in (("fake-a", server.server_address[1]), ("fake-down", dead_port)):
        cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        cluster.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(
            {"status": {"addresses": [{"type": "InternalIP", "address": ADDR}],
                        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}))
    ns = cluster.namespace("top-test")
    pods = []
    for name, node in (("full", "fake-a"), ("idle", "fake-a"), ("half", "fake-a"), ("elsewhere", "fake-down")):
        size = {"idle": "64Gi"}.get(name, "2Gi")
        cluster.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": ns, "labels": {"app": "top"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"job-{name}", "uid": "0",
                                 "controller": True}] if name != "half" else []},
            "spec": {"nodeName": node, "containers": [{"name": "t", "image": "pytorch/pytorch",
                                                       "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}],
                     "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size}}]}})
        cluster.kubectl("patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge",
                        "-p", json.dumps({"status": {"phase": "Running"}}))
        uid = cluster.get("pod", name, "-n", ns)["metadata"]["uid"]
        if node == "fake-a":
            pods.append((ns, name, uid))
    FakeKubelet.pods = pods
    try:
        yield ns
    finally:
        server.shutdown()
        for node in ("fake-a", "fake-down"):
            cluster.kubectl("delete", "node", node, "--wait=false", check=False)
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        subprocess.run(["ip", "link", "del", LINK], capture_output=True)


def top(cluster, *args, kubeconfig=None):
    env = dict(cluster.env)
    if kubeconfig:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([BIN, "top", *args], capture_output=True, text=True, env=env, timeout=60)


def test_top_shows_each_pods_use_from_capacity_minus_available(cluster, fleet):
    r = top(cluster, "-n", fleet, "-o", "json")
    assert r.returncode == 1, r.stderr  # a node gave no figures
    out = json.loads(r.stdout)
    by = {i["pod"]: i for i in out["items"]}
    assert set(by) == {"full", "idle", "half", "elsewhere"}
    assert by["half"]["usedBytes"] == 604061696 and by["half"]["kubeletUsedBytes"] == 0
    assert by["half"]["measuredAt"] == MEASURED_AT  # the kubelet's own time of the figures
    assert by["half"]["mountedBytes"] == 2147483648 and by["half"]["verdict"] == "ok"
    assert by["full"]["verdict"] == "nearly full" and by["full"]["usedBytes"] == 2 * GiB - 2 * GiB // 20
    assert by["full"]["suggestedSize"] == "2919Mi"  # 95% of 2Gi (1945.6Mi) x 1.5, rounded up to a MiB
    assert by["idle"]["verdict"] == "oversized" and by["idle"]["suggestedSize"] == "1Gi"
    assert by["full"]["owner"] == {"kind": "Job", "name": "job-full"}
    assert by["elsewhere"]["usedBytes"] is None and by["elsewhere"]["verdict"] == "no stats yet"
    assert by["elsewhere"]["measuredAt"] is None
    assert [n["node"] for n in out["failedNodes"]] == ["fake-down"]
    assert "node fake-down:" in r.stderr and "its pods have no figures" in r.stderr


def test_top_table_names_owner_bar_and_suggestion(cluster, fleet):
    r = top(cluster, "-n", fleet, "-l", "app=top")
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE/POD", "OWNER", "SIZE", "MOUNTED", "USED", "USE%", "VERDICT"]
    half = next(line for line in lines if line.startswith(f"{fleet}/half "))
    assert "2Gi" in half and "589904Ki" in half and "[#####..............." in half and "28.1%" in half and half.endswith("ok")
    assert f"suggestion: Job/job-full (namespace {fleet}): shmguard.io/size: 2919Mi" in lines
    assert f"suggestion: Job/job-idle (namespace {fleet}): shmguard.io/size: 1Gi" in lines


def test_a_user_without_the_node_proxy_is_told_which_permission_is_missing(cluster, fleet, tmp_path):
    cfg = sa_kubeconfig(cluster, tmp_path, fleet, node_proxy=False)
    r = top(cluster, "-n", fleet, "-o", "json", kubeconfig=cfg)
    assert r.returncode == 1
    assert "needs `get nodes/proxy`" in r.stderr and "node fake-a:" in r.stderr, r.stderr
    r = top(cluster, "-A", kubeconfig=cfg)
    assert r.returncode == 2 and "cannot list pods" in r.stderr and "in every namespace (-A)" in r.stderr, r.stderr


def test_an_exec_credential_plugin_gives_the_token(cluster, fleet, tmp_path):
    cfg = sa_kubeconfig(cluster, tmp_path, fleet, node_proxy=True, exec_plugin=True)
    r = top(cluster, "-n", fleet, "-o", "json", kubeconfig=cfg)
    by = {i["pod"]: i for i in json.loads(r.stdout)["items"]}
    assert by["half"]["usedBytes"] == 604061696, r.stderr


def test_watch_keeps_the_peak(cluster, fleet):
    r = top(cluster, "-n", fleet, "--watch", "2s", "--interval", "1", "-l", "app=top")
    assert r.stdout.splitlines()[0].split()[-2:] == ["PEAK", "VERDICT"]


def test_the_docs_top_example_is_what_top_prints(cluster, fleet):
    doc = (BIN_SRC / "docs" / "monitoring.md").read_text()
    block = doc.split("$ kubectl shmguard top -n ml --watch 5m\n", 1)[1].split("```", 1)[0]
    want = [" ".join(line.replace("ml/", f"{fleet}/").replace("namespace ml)", f"namespace {fleet})").split())
            for line in block.strip().splitlines()]
    r = top(cluster, "-n", fleet, "--watch", "2s", "--interval", "1", "-l", "app=top")
    got = [" ".join(line.split()) for line in r.stdout.strip().splitlines()]
    assert got == want, r.stdout

def test_bad_kubeconfig_is_an_error_that_names_it(cluster, tmp_path):
    bad = tmp_path / "config"
    bad.write_text("apiVersion: v1\nclusters: [\n")
    r = top(cluster, kubeconfig=bad)
    assert r.returncode == 2 and str(bad) in r.stderr and "invalid kubeconfig" in r.stderr, r.stderr


def metrics(port):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def wait_for(pred, timeout=30):
    import time
    end = time.time() + timeout
    while time.time() < end:
        try:
            if v := pred():
                return v
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_monitor_exports_use_size_peak_and_node_health_and_warns_at_90_percent(cluster, fleet):
    import signal
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([BIN, "monitor", "--listen", f"127.0.0.1:{port}", "--period", "1", "--kubelet-insecure-tls",
                             "--kubelet-timeout", "2"], env=cluster.env, stderr=subprocess.PIPE, text=True)
    try:
        def scraped():
            m = metrics(port)
            return m if "shmguard_shm_used_bytes{" in m else None
        text = wait_for(scraped)
        labels = f'namespace="{fleet}",pod="half",owner_kind="",owner_name=""'
        assert f"shmguard_shm_used_bytes{{{labels}}} 604061696\n" in text
        assert f"shmguard_shm_size_bytes{{{labels}}} 2147483648\n" in text
        assert f"shmguard_shm_peak_bytes{{{labels}}} 604061696\n" in text
        assert f'shmguard_shm_used_bytes{{namespace="{fleet}",pod="full",owner_kind="Job",owner_name="job-full"}}' in text
        assert 'pod="elsewhere"' not in text  # its kubelet is down: no figures, never a made-up 0
        assert 'shmguard_node_last_good_scrape_age_seconds{node="fake-a"}' in text
        assert 'shmguard_node_last_good_scrape_age_seconds{node="fake-down"}' not in text
        wait_for(lambda: 'shmguard_node_scrape_errors_total{node="fake-down"} 2' in metrics(port))
        promtool = shutil.which("promtool", path=cluster.env.get("PATH"))
        if promtool:  # hack/testbin.sh builds it; the exposition must pass Prometheus's own lint
            lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            assert lint.returncode == 0, lint.stdout + lint.stderr
        for family in ("shmguard_shm_used_bytes", "shmguard_shm_size_bytes", "shmguard_shm_peak_bytes",
                       "shmguard_node_scrape_errors_total", "shmguard_node_last_good_scrape_age_seconds"):
            assert f"# TYPE {family} " in text and f"# HELP {family} " in text
        # The pod at 95% gets one Event, with the suggestion; the others none.
        events = wait_for(lambda: [e for e in cluster.get("events", "-n", fleet)["items"]
                                   if e["reason"] == "ShmNearlyFull"] or None)
        assert [e["involvedObject"]["name"] for e in events] == ["full"]
        assert "95% full" in events[0]["message"] and "shmguard.io/size: 2919Mi" in events[0]["message"]
        assert events[0]["type"] == "Warning" and events[0]["source"]["component"] == "shmguard-monitor"
        # A pod that is gone takes its series with it.
        cluster.kubectl("delete", "pod", "idle", "-n", fleet, "--grace-period=0", "--force")
        wait_for(lambda: 'pod="idle"' not in metrics(port))
        assert len([e for e in cluster.get("events", "-n", fleet)["items"] if e["reason"] == "ShmNearlyFull"]) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "node fake-down:" in err and "cycle 1:" in err


def test_the_monitors_service_account_can_read_stats_and_write_events_and_nothing_else(cluster):
    ns = cluster.namespace("shmguard-monitor-rbac")
    rendered = subprocess.run([str(cluster.bindir / "helm"), "template", "rbac", str(BIN_SRC / "charts" / "shmguard"),
                               "--namespace", ns, "--set", "monitor.enabled=true",
                               "--show-only", "templates/monitor.yaml"], capture_output=True, text=True, check=True).stdout
    objs = [o for o in yaml.safe_load_all(rendered) if o and o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    assert len(objs) == 3
    for o in objs:
        cluster.apply(o)
    who = f"system:serviceaccount:{ns}:rbac-shmguard-monitor"
    hook = f"rbac-shmguard-{ns}"  # the release's MutatingWebhookConfiguration
    allowed = [("get", "nodes/stats"), ("list", "nodes"), ("list", "pods"), ("watch", "pods"), ("create", "events"),
               ("list", "namespaces"), ("get", f"mutatingwebhookconfigurations.admissionregistration.k8s.io/{hook}")]
    denied = [("get", "nodes/proxy"), ("create", "pods/exec"), ("get", "secrets"), ("list", "secrets"),
              ("create", "pods"), ("delete", "pods"), ("patch", "pods"), ("get", "configmaps"), ("update", "nodes"),
              ("delete", "events"), ("update", "namespaces"),
              ("list", "mutatingwebhookconfigurations.admissionregistration.k8s.io"),
              ("get", "mutatingwebhookconfigurations.admissionregistration.k8s.io/another"),
              ("update", f"mutatingwebhookconfigurations.admissionregistration.k8s.io/{hook}")]
    for verb, res in allowed + denied:
        resource, _, sub = res.partition("/")
        if "." in resource:  # a named object: resource/name
            what = [res]
        else:
            what = [resource, *([f"--subresource={sub}"] if sub else [])]
        r = cluster.kubectl("auth", "can-i", verb, *what, "--as", who, "-A", check=False)
        assert r.stdout.strip() == ("yes" if (verb, res) in allowed else "no"), (verb, res, r.stdout, r.stderr)
    for o in objs:
        cluster.kubectl("delete", o["kind"].lower(), o["metadata"]["name"], *(["-n", ns] if o["kind"] == "ServiceAccount" else []),
                        check=False)


def monitor_once(cluster, *args, env=None):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return subprocess.run([BIN, "monitor", "--listen", f"127.0.0.1:{port}", "--cycles", "1", "--no-events",
                           "--kubelet-timeout", "2", *args], env=dict(cluster.env, **(env or {})),
                          capture_output=True, text=True, timeout=60)


def test_the_monitor_trusts_the_kubelet_ca_it_is_given_and_nothing_else(cluster, fleet):
    """--kubelet-ca (the chart passes the cluster CA) is the only trust: a certificate that chains to
    another CA fails even when that CA is in the system's bundle (SSL_CERT_FILE here), as kubectl
    trusts a kubeconfig's CA alone. httplib used to add the system bundle to the given CA."""
    ok = monitor_once(cluster, "--kubelet-ca", str(KUBELET_CA[0]))
    assert ok.returncode == 0 and "(1 failed)" in ok.stderr and "node fake-a:" not in ok.stderr, ok.stderr
    cluster_ca = str(Path(cluster.env["CLUSTER_DIR"]) / "pki" / "ca.crt")
    wrong = monitor_once(cluster, "--kubelet-ca", cluster_ca, env={"SSL_CERT_FILE": str(KUBELET_CA[0])})
    assert "node fake-a: cannot reach 10.213.9.1:" in wrong.stderr, wrong.stderr
    assert "unable to get local issuer certificate" in wrong.stderr, wrong.stderr
    # Without --kubelet-ca the API server's CA (from the kubeconfig) is the kubelets' CA, as in
    # metrics-server: this fake kubelet's CA is another one.
    default = monitor_once(cluster)
    assert "node fake-a: cannot reach" in default.stderr and "unable to get local issuer certificate" in default.stderr


def test_a_kubeconfig_ca_is_the_only_trust_for_the_api_server(cluster, fleet, tmp_path):
    admin = yaml.safe_load(open(cluster.env["KUBECONFIG"]))
    admin["clusters"][0]["cluster"]["certificate-authority"] = str(KUBELET_CA[0])
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(admin))
    cluster_ca = str(Path(cluster.env["CLUSTER_DIR"]) / "pki" / "ca.crt")
    r = subprocess.run([BIN, "top", "-n", fleet], capture_output=True, text=True, timeout=60,
                       env=dict(cluster.env, KUBECONFIG=str(path), SSL_CERT_FILE=cluster_ca))
    assert r.returncode != 0 and "certificate" in r.stderr, r.stderr
    assert "unable to get local issuer certificate" in r.stderr, r.stderr


def test_monitor_check_waits_for_a_pods_figures_and_names_what_is_missing(cluster, fleet):
    """What `helm test` runs against the chart's monitor: exit 0 once the monitor reports the pod,
    else 1 naming the pod and each node's failed scrapes."""
    import signal
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([BIN, "monitor", "--listen", f"127.0.0.1:{port}", "--period", "1", "--kubelet-timeout", "2",
                             "--kubelet-ca", str(KUBELET_CA[0]), "--no-events"], env=cluster.env,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        r = subprocess.run([BIN, "monitor", "--check", url, "--expect-pod", f"{fleet}/half", "--check-timeout", "30"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert f"{fleet}/half: /dev/shm 589904Ki used of 2Gi (peak 589904Ki)" in r.stdout, r.stdout
        assert "node fake-a: 0 failed scrapes, last good one " in r.stdout, r.stdout
        r = subprocess.run([BIN, "monitor", "--check", url, "--expect-pod", f"{fleet}/elsewhere", "--check-timeout", "3"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        assert f"has no /dev/shm figures for {fleet}/elsewhere" in r.stderr, r.stderr
        assert "node fake-down: " in r.stderr and "failed scrapes, never a good one" in r.stderr, r.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    r = subprocess.run([BIN, "monitor", "--check", url, "--check-timeout", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and f"{url} did no cycle in 2s: " in r.stderr, r.stderr
    r = subprocess.run([BIN, "monitor", "--check", "https://x:1", "--expect-pod", "nameonly"], capture_output=True, text=True)
    assert r.returncode == 2 and "want http://HOST:PORT" in r.stderr, r.stderr
