"""Pods shmguard missed, against the real kube-apiserver: a training pod made before the webhook
configuration existed, one the API server admitted while the webhook could not answer (the real
fail-open, counted by the API server), one in a namespace the configuration does not select, and one
whose own /dev/shm is below its hints. `top` and the monitor judge every running pod with the engine
and say which are unprotected and why. No pod runs here (tests/node has the kubelet): the tests
write each pod's status as a kubelet would."""
import json
import signal
import socket
import subprocess
import time

import pytest

from pylib.cluster import webhook_config
from pylib.paths import BIN

HOOK = "unprotected"
HINTS = {"shmguard.io/batch-size": "48", "shmguard.io/num-workers": "6", "shmguard.io/sample-size": "768Ki"}


def worker(name, ns, own_shm=None):
    """A PyTorchJob worker as the training operator makes it, with the user's hints."""
    container = {"name": "pytorch", "image": "ghcr.io/acme/bert:1", "command": ["torchrun", "--nproc-per-node=2", "train.py"]}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "annotations": dict(HINTS),
                        "labels": {"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker"}},
           "spec": {"containers": [container]}}
    if own_shm:
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        pod["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": own_shm}}]
    return pod


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail_opens(cluster):
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_admission_webhook_fail_open_count{") and f'name="{HOOK}.shmguard.io"' in line)


@pytest.fixture(scope="module")
def missed(cluster, url_certs, tmp_path_factory):  # noqa: F811
    sel = cluster.namespace("unprot-selected", {"shmguard-test": HOOK})
    out = cluster.namespace("unprot-outside")
    cluster.apply(worker("early", sel))
    time.sleep(1.2)  # creationTimestamps have a second's grain
    # The webhook: failurePolicy Ignore, and nothing listens where it points.
    cfg = webhook_config(HOOK, (url_certs / "ca.crt").read_bytes(), url=f"https://127.0.0.1:{closed_port()}/mutate",
                         failure="Ignore")
    cfg["metadata"]["labels"] = {"app.kubernetes.io/name": "shmguard-test"}
    before = fail_opens(cluster)
    cluster.apply(cfg)
    time.sleep(1.2)
    web = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": sel},
           "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}
    for pod in (worker("missed", sel), worker("own", sel, own_shm="1Gi"), web, worker("outside", out)):
        cluster.apply(pod)
    for ns, name in ((sel, "early"), (sel, "missed"), (sel, "own"), (sel, "web"), (out, "outside")):
        cluster.kubectl("patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge",
                        "-p", json.dumps({"status": {"phase": "Running"}}))
    try:
        yield {"sel": sel, "out": out, "fail_opens": fail_opens(cluster) - before}
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", HOOK, "--ignore-not-found")
        for ns in (sel, out):
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def top(cluster, *args):
    return subprocess.run([BIN, "top", "--webhook-configuration", HOOK, *args], capture_output=True, text=True,
                          env=cluster.env, timeout=60)


def engine_size(tmp_path, pod):
    """What `shmguard check -o json` says the pod's template needs: the same engine, offline."""
    f = tmp_path / "pod.json"
    f.write_text(json.dumps(pod))
    r = subprocess.run([BIN, "check", "-o", "json", "--fail-on", "none", "-f", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["items"][0]


def test_the_api_server_admitted_the_later_pods_without_the_webhook(missed):
    assert missed["fail_opens"] >= 2  # missed and own; the others are outside or made before it


def test_top_names_each_unprotected_pod_and_why(cluster, missed, tmp_path):
    r = top(cluster, "-n", missed["sel"], "-o", "json")
    assert r.returncode == 0, r.stderr
    by = {i["pod"]: i for i in json.loads(r.stdout)["items"]}
    assert set(by) == {"early", "missed", "own"}  # web is no training pod: no concern of shmguard's
    assert by["early"]["unprotected"]["reason"] == "before-install"
    assert by["missed"]["unprotected"]["reason"] == "failed-open"
    assert "failurePolicy Ignore admitted it" in by["missed"]["unprotected"]["message"]
    assert by["missed"]["volume"] == "" and by["missed"]["verdict"] == "-" and by["missed"]["mountedBytes"] is None
    assert by["own"]["unprotected"]["reason"] == "too-small" and by["own"]["unprotected"]["hasBytes"] == 1 << 30
    # The need is what the engine gives the pod offline: one engine, wherever it runs.
    offline = engine_size(tmp_path, worker("missed", missed["sel"]))
    assert offline["procs"]["count"] == 2 and offline["decision"] == "would inject " + offline["size"]
    assert by["missed"]["unprotected"]["need"] == offline["size"] == "1896Mi", offline
    assert by["missed"]["unprotected"]["needBytes"] == 1896 << 20
    r = top(cluster, "-n", missed["out"], "-o", "json")
    (item,) = json.loads(r.stdout)["items"]
    assert item["pod"] == "outside" and item["unprotected"]["reason"] == "namespace-not-selected"
    assert f"namespace {missed['out']} is outside the namespaceSelector of MutatingWebhookConfiguration {HOOK}" in \
        item["unprotected"]["message"]


def test_top_table_has_the_column_and_a_line_per_pod(cluster, missed):
    r = top(cluster, "-n", missed["sel"])
    lines = r.stdout.splitlines()
    assert lines[0].split()[-2:] == ["VERDICT", "UNPROTECTED"], r.stdout
    row = next(line for line in lines if line.startswith(f"{missed['sel']}/missed "))
    assert row.split()[-2:] == ["failed", "open"] and "PyTorchJob" not in row  # no owner: a bare pod here
    assert any(line.startswith(f"unprotected: {missed['sel']}/early: ") and "before MutatingWebhookConfiguration" in line
               for line in lines), r.stdout


def test_without_the_webhook_configuration_the_reason_is_unknown_and_said(cluster, missed):
    r = subprocess.run([BIN, "top", "-n", missed["sel"], "-o", "json", "--webhook-configuration", "nonesuch"],
                       capture_output=True, text=True, env=cluster.env, timeout=60)
    by = {i["pod"]: i for i in json.loads(r.stdout)["items"]}
    assert by["missed"]["unprotected"]["reason"] == "not-injected"
    assert "MutatingWebhookConfiguration nonesuch" in by["missed"]["unprotected"]["message"]


def metrics(port):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def test_the_monitor_exports_them_and_writes_one_event_each(cluster, missed):
    port = closed_port()
    proc = subprocess.Popen([BIN, "monitor", "--listen", f"127.0.0.1:{port}", "--period", "1", "--kubelet-insecure-tls",
                             "--webhook-configuration", HOOK], env=cluster.env, stderr=subprocess.PIPE, text=True)
    sel, out = missed["sel"], missed["out"]
    try:
        end, text = time.time() + 30, ""
        while time.time() < end and "shmguard_monitor_cycles_total 3" not in text:
            try:
                text = metrics(port)
            except OSError:
                pass
            time.sleep(0.3)
        assert "shmguard_monitor_cycles_total 3" in text
        for ns, pod, reason in ((sel, "early", "before-install"), (sel, "missed", "failed-open"), (sel, "own", "too-small"),
                                (out, "outside", "namespace-not-selected")):
            assert (f'shmguard_pod_unprotected{{namespace="{ns}",pod="{pod}",owner_kind="",owner_name="",'
                    f'reason="{reason}"}} 1\n') in text, text
        assert f'shmguard_unprotected_pods{{namespace="{sel}",reason="failed-open"}} 1\n' in text
        assert f'shmguard_unprotected_pods{{namespace="{out}",reason="namespace-not-selected"}} 1\n' in text
        assert 'pod="web"' not in text
        # One Warning Event per pod, however many cycles ran.
        events = [e for e in cluster.get("events", "-n", sel)["items"] if e["reason"] == "ShmUnprotected"]
        assert sorted(e["involvedObject"]["name"] for e in events) == ["early", "missed", "own"]
        assert all(e["type"] == "Warning" and e["source"]["component"] == "shmguard-monitor" for e in events)
        msg = next(e["message"] for e in events if e["involvedObject"]["name"] == "own")
        assert "its own /dev/shm has sizeLimit 1Gi where its hints need 1896Mi" in msg
        # Recreated after the webhook answers again, the pod is gone from the metrics with the old one.
        cluster.kubectl("delete", "pod", "early", "-n", sel, "--grace-period=0", "--force")
        end = time.time() + 20
        while time.time() < end and 'pod="early"' in metrics(port):
            time.sleep(0.3)
        assert 'pod="early"' not in metrics(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert " unprotected, " in err
