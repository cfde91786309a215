"""The owner lookup against the real kube-apiserver: a TrainJob's spec.annotations reach its JobSet
and stop there (Trainer v2.0.0, JobSet v0.8.2), so the webhook reads a JobSet pod's hints from its
JobSet. JobSet's own CRD (from the Go module cache, as hack/testbin.sh reads modules) makes the
JobSets real objects; no JobSet controller runs, so the tests create the pods it would, in the
shape Trainer's torch-distributed runtime gives them (the jobset-name label, PET_NPROC_PER_NODE).
The webhook's credentials are the chart's own ServiceAccount and ClusterRole, rendered by helm."""
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from pylib.cluster import webhook_config
from pylib.paths import BIN, SRC
from pylib.webhook import Server, decode_patch, review
from pylib.cluster import wait_until_called

JOBSET = "sigs.k8s.io/jobset@v0.8.2"
NAME = "ol"                    # the Helm release whose ServiceAccount and ClusterRole are used
HINTS = {"shmguard.io/batch-size": "48", "shmguard.io/num-workers": "6", "shmguard.io/sample-size": "768Ki"}


def module_dir(module):
    """A Go module's directory in the module cache (downloaded once, like hack/testbin.sh's)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([go, "mod", "download", "-json", module], capture_output=True, text=True, cwd=d,
                           env=dict(os.environ, GO111MODULE="on", GOFLAGS="-mod=mod"), timeout=600)
    assert r.returncode == 0, f"go mod download {module}:\n{r.stdout}\n{r.stderr}"
    return Path(json.loads(r.stdout)["Dir"])


@pytest.fixture(scope="module")
def jobset_crd(cluster):
    crd = module_dir(JOBSET) / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"
    cluster.kubectl("apply", "--server-side", "-f", str(crd))
    # (kubectl wait --for=condition fails at once on a CRD whose status has no conditions yet.)
    deadline = time.time() + 60
    while not any(c["type"] == "Established" and c["status"] == "True"
                  for c in cluster.get("crd", "jobsets.jobset.x-k8s.io").get("status", {}).get("conditions") or []):
        assert time.time() < deadline, "the JobSet CRD was never Established"
        time.sleep(0.2)
    return crd


@pytest.fixture(scope="module")
def chart_identity(cluster):
    """The chart's ServiceAccount, ClusterRole and binding, applied; a kubeconfig with its token."""
    ns = cluster.namespace("shmguard-ol")
    rendered = cluster.helm("template", NAME, str(SRC / "charts" / "shmguard"), "--namespace", ns,
                            "--show-only", "templates/serviceaccount.yaml", "--show-only", "templates/rbac.yaml").stdout
    objs = [o for o in yaml.safe_load_all(rendered) if o]
    assert sorted(o["kind"] for o in objs) == ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"]
    for o in objs:
        cluster.apply(o)
    sa = next(o for o in objs if o["kind"] == "ServiceAccount")["metadata"]["name"]
    token = cluster.kubectl("create", "token", sa, "-n", ns).stdout.strip()
    admin = yaml.safe_load(open(cluster.env["KUBECONFIG"]))
    path = Path(tempfile.mkdtemp(prefix="shmguard-ol-")) / "kubeconfig"
    path.write_text(yaml.safe_dump(dict(admin, users=[{"name": "admin", "user": {"token": token}}])))
    return {"who": f"system:serviceaccount:{ns}:{sa}", "kubeconfig": path}


@pytest.fixture(scope="module")
def webhook(cluster, url_certs, jobset_crd, chart_identity):
    server = Server(url_certs / "tls.crt", url_certs / "tls.key", url_certs / "ca.crt",
                    extra_args=["--kubeconfig", str(chart_identity["kubeconfig"])])
    cluster.apply(webhook_config("ol", (url_certs / "ca.crt").read_bytes(),
                                 url=f"https://127.0.0.1:{server.port}/mutate"))
    wait_until_called(cluster, cluster.namespace("ol-probe", {"shmguard-test": "ol"}))
    yield server
    server.stop()
    cluster.kubectl("delete", "mutatingwebhookconfiguration", "ol", "--ignore-not-found")


def jobset(name, annotations):
    """A JobSet as Trainer v2.0.0 makes one from a TrainJob: the TrainJob's spec.annotations on it."""
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "node", "image": "pytorch/pytorch:2.7.1", "command": ["torchrun", "train.py"]}]}}}}}]}}


def trainer_pod(jobset_name, index=0, annotations=None):
    """A trainer pod of that JobSet, as JobSet v0.8.2 and Trainer's torch-distributed runtime shape it."""
    md = {"generateName": f"{jobset_name}-node-0-{index}-",
          "labels": {"jobset.sigs.k8s.io/jobset-name": jobset_name, "jobset.sigs.k8s.io/replicatedjob-name": "node",
                     "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"restartPolicy": "OnFailure",
                     "containers": [{"name": "node", "image": "pytorch/pytorch:2.7.1",
                                     "command": ["torchrun", "train.py"],
                                     "env": [{"name": "PET_NPROC_PER_NODE", "value": "2"}]}]}}


def create(cluster, ns, pod):
    r = cluster.kubectl("create", "-n", ns, "-o", "json", "-f", "-", stdin=json.dumps(pod))
    return json.loads(r.stdout), r.stderr


def shm_size(pod):
    vols = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    return vols["shmguard-dshm"]["emptyDir"]["sizeLimit"]


def size_cli(*args):
    return subprocess.run([BIN, "size", *args], capture_output=True, text=True, check=True).stdout.splitlines()[0]


def test_the_chart_grants_get_on_jobsets_and_nothing_else(cluster, chart_identity, jobset_crd):
    who = chart_identity["who"]
    allowed = [("get", "jobsets.jobset.x-k8s.io")]
    denied = [("list", "jobsets.jobset.x-k8s.io"), ("watch", "jobsets.jobset.x-k8s.io"),
              ("create", "jobsets.jobset.x-k8s.io"), ("get", "jobs.batch"), ("get", "pods"), ("list", "pods"),
              ("get", "secrets"), ("get", "configmaps"), ("create", "events")]
    for verb, res in allowed + denied:
        r = cluster.kubectl("auth", "can-i", verb, res, "--as", who, "-n", "team-a", check=False)
        assert r.stdout.strip() == ("yes" if (verb, res) in allowed else "no"), (verb, res, r.stdout, r.stderr)


def test_a_trainjobs_hints_reach_its_pods_through_the_jobset(cluster, webhook, tmp_path):
    ns = cluster.namespace("ol-team", {"shmguard-test": "ol"})
    cluster.apply(jobset("bert", HINTS), "-n", ns)
    want = size_cli("--batch-size", "48", "--num-workers", "6", "--sample-size", "768Ki", "--procs-per-pod", "2")
    assert want == "1896Mi"
    pods = [create(cluster, ns, trainer_pod("bert", i))[0] for i in range(2)]
    for pod in pods:
        assert shm_size(pod) == want, pod["spec"].get("volumes")
        sizing = pod["metadata"]["annotations"]["shmguard.io/sizing"]
        assert f"annotations from JobSet {ns}/bert" in sizing and "procs 2 from PET_NPROC_PER_NODE" in sizing, sizing
        assert "shmguard.io/batch-size" not in pod["metadata"]["annotations"]  # read, not copied
    # One GET for the JobSet, the second pod from the cache; the log says so.
    assert webhook.metric("shmguard_owner_lookups_total", '{result="found",source="api"}') == 1
    assert webhook.metric("shmguard_owner_lookups_total", '{result="found",source="cache"}') == 1
    logged = [l for l in webhook.logs() if l.get("msg") == "admission" and l.get("namespace") == ns]
    assert [l.get("owner_lookup") for l in logged] == ["found", "found (cached)"], logged

    # Offline: the TrainJob the user wrote, with the same spec.annotations, predicts the same size.
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "bert", "namespace": ns},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "annotations": HINTS,
                         "trainer": {"image": "pytorch/pytorch:2.7.1", "command": ["torchrun", "train.py"],
                                     "numNodes": 1, "numProcPerNode": 2}}}
    f = tmp_path / "trainjob.yaml"
    f.write_text(yaml.safe_dump(trainjob))
    r = subprocess.run([BIN, "check", "-o", "json", str(f)], capture_output=True, text=True)
    item = json.loads(r.stdout)["items"][0]
    assert (item["kind"], item["size"], item["procs"]["count"]) == ("TrainJob", want, 2), item


def test_the_pods_own_hints_win_and_no_lookup_is_made(cluster, webhook):
    ns = cluster.namespace("ol-own", {"shmguard-test": "ol"})
    cluster.apply(jobset("own", HINTS), "-n", ns)
    before = webhook.metric("shmguard_owner_lookups_total", '{result="found",source="api"}')
    pod, _ = create(cluster, ns, trainer_pod("own", annotations={"shmguard.io/size": "3Gi"}))
    assert shm_size(pod) == "3Gi"
    assert webhook.metric("shmguard_owner_lookups_total", '{result="found",source="api"}') == before


def test_a_missing_jobset_falls_back_with_a_warning(cluster, webhook):
    ns = cluster.namespace("ol-gone", {"shmguard-test": "ol"})
    pod, stderr = create(cluster, ns, trainer_pod("gone"))
    assert shm_size(pod) == "8Gi"  # the pod's own facts: no hints, the default
    assert (f"Warning: shmguard: could not read JobSet {ns}/gone for its shmguard.io/ annotations (not found); "
            "sized from the pod's own facts") in stderr, stderr
    assert webhook.metric("shmguard_owner_lookups_total", '{result="not-found",source="api"}') == 1


def silent_server():
    """A TCP listener that accepts and never answers: an API server that hangs."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    held = []
    stop = threading.Event()

    def run():
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(s.accept()[0])
            except OSError:
                pass
    threading.Thread(target=run, daemon=True).start()
    return s, stop


def test_a_hanging_api_server_costs_one_timeout_per_jobset(url_certs, tmp_path):
    listener, stop = silent_server()
    port = listener.getsockname()[1]
    kubeconfig = tmp_path / "hang.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hang",
        "clusters": [{"name": "hang", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                   "certificate-authority-data": base64.b64encode(
                                                       (url_certs / "ca.crt").read_bytes()).decode()}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "hang", "context": {"cluster": "hang", "user": "u"}}]}))
    config = tmp_path / "config.yaml"
    config.write_text("ownerLookup:\n  timeoutMs: 300\n")
    server = Server(url_certs / "tls.crt", url_certs / "tls.key", url_certs / "ca.crt", config=config,
                    extra_args=["--kubeconfig", str(kubeconfig)])
    try:
        times = []
        for i in range(3):
            t0 = time.monotonic()
            status, body = server.post(json.dumps(review(trainer_pod("slow", i))))
            times.append(time.monotonic() - t0)
            assert status == 200
            res = json.loads(body)["response"]
            assert any("could not read JobSet ml/slow" in w for w in res.get("warnings", [])), res
            patched = decode_patch(res)
            assert any(op.get("path") == "/spec/volumes" for op in patched), patched  # still injected
        # The first waits out the 300 ms once; the failure is kept 5 s, so the next ones do not wait.
        assert 0.25 < times[0] < 1.5, times
        assert max(times[1:]) < 0.2, times
        assert server.metric("shmguard_owner_lookups_total", '{result="error",source="api"}') == 1
        assert server.metric("shmguard_owner_lookups_total", '{result="error",source="cache"}') == 2
    finally:
        server.stop()
        stop.set()
        listener.close()
