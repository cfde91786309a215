"""`helm install --wait` means the next pod is injected. The chart's install check (a post-install and
post-upgrade hook Job in shmguard's image) creates a training pod through the API server as a dry
run until the answer carries shmguard's /dev/shm, so Helm returns only once the whole path works:
API server -> the Service's new ClusterIP (kube-proxy's rules) -> a webhook pod.

Here: uninstall -> `helm install --wait` -> a training Job created the moment Helm returns, 20 times,
each with a new Service. Every Job's pod must be injected and its real DataLoader must finish. The
same with `--no-hooks` (the install as it was before the check) is measured beside it. A webhook
the API server cannot reach fails the install, and the check's log says what did not answer. The
check's ServiceAccount can make dry runs and nothing else."""
import json
import re
import subprocess
import sys

import pytest

from pylib.node import IMAGE_VALUES, NAMESPACE, helm_install, injected_dry_run, shm_volume
from pylib.paths import SRC
from pylib.node import ANNOTATIONS, BUS_ERROR, job

ROUNDS = 20
BEFORE_ROUNDS = 3


@pytest.fixture(scope="module")
def ns(release):
    name = release.namespace("install-check-jobs")
    yield name
    release.kubectl("delete", "namespace", name, "--wait=false", check=False)


def readme_wait_command():
    """The documented command for installs without the check (--no-hooks, kubectl apply -k deploy/):
    docs/install.md, "The install check"."""
    from pylib.readme_blocks import commands, section
    cmds = [c for c in commands(section("The install check", doc="docs/install.md")) if "shmguard-probe" in c]
    assert len(cmds) == 1, cmds
    return cmds[0]


def uninstall(node):
    r = node.helm("uninstall", "shmguard", "-n", NAMESPACE, "--wait", timeout=240)
    assert "uninstalled" in r.stdout, r.stdout


def service(node):
    svc = node.get("service", "shmguard", "-n", NAMESPACE)
    return svc["metadata"]["uid"], svc["spec"]["clusterIP"]


def first_pod(node, name, ns):
    return node.wait(f"the pod of job {name}", lambda: node.pod_of_job(name, ns), timeout=60, every=0.2)


def finished(node, name, ns):
    outcome = node.wait(f"job {name}", lambda: node.job_done(name, ns), timeout=300, every=2)
    pod = node.pod_of_job(name, ns)
    return outcome, node.logs("-n", ns, pod["metadata"]["name"])


def install_then_job(node, ns, name, *extra):
    """Install with --wait, create the Job the moment Helm returns: (install seconds, the Job's pod)."""
    r, seconds = helm_install(node, *extra)
    assert r.returncode == 0, f"helm install failed:\n{r.stdout}\n{r.stderr}"
    node.apply(job(name, ANNOTATIONS), "-n", ns)
    return seconds, first_pod(node, name, ns)


def test_a_job_created_as_helm_install_returns_is_injected_20_of_20(release, ns):
    node = release
    # Before: the same install without the check (--no-hooks). Measured, not asserted: whether a pod
    # slips through depends on how fast kube-proxy programs the new ClusterIP.
    before = []
    for i in range(BEFORE_ROUNDS):
        uninstall(node)
        seconds, pod = install_then_job(node, ns, f"before-{i}", "--no-hooks")
        before.append((seconds, shm_volume(pod) is not None))
        node.kubectl("delete", "job", f"before-{i}", "-n", ns, "--wait=false")
        # The documented wait for such installs (docs/install.md): once it returns, the next pod is injected.
        r = subprocess.run(["timeout", "120", "bash", "-c", readme_wait_command()], env=node.env,
                           capture_output=True, text=True, timeout=130)
        assert r.returncode == 0, r.stderr
        assert injected_dry_run(node)
    services, rounds, running = set(), [], []
    for i in range(ROUNDS):
        uninstall(node)
        seconds, pod = install_then_job(node, ns, f"at-once-{i}")
        uid, ip = service(node)
        assert uid not in {u for u, _ in services}, "the Service was not made anew"
        services.add((uid, ip))
        vol = shm_volume(pod)
        rounds.append((seconds, ip, vol["emptyDir"]["sizeLimit"] if vol else None))
        running.append(f"at-once-{i}")
        if len(running) > 2:  # at most three DataLoaders at a time on two cores
            outcome, log = finished(node, running.pop(0), ns)
            assert outcome == "Complete" and not BUS_ERROR.search(log), log
    for name in running:
        outcome, log = finished(node, name, ns)
        assert outcome == "Complete" and not BUS_ERROR.search(log), log
    sys.stderr.write("node: helm install --wait, then a Job at once:\n"
                     + "".join(f"  before (--no-hooks) {s:.1f}s: {'injected' if ok else 'NOT injected'}\n"
                               for s, ok in before)
                     + "".join(f"  {s:.1f}s ClusterIP {ip}: {size or 'NOT injected'}\n" for s, ip, size in rounds))
    missed = [r for r in rounds if r[2] is None]
    assert not missed, f"{len(missed)}/{ROUNDS} Jobs created as helm install --wait returned were not injected: {rounds}"
    assert all(size == "1Gi" for _, _, size in rounds), rounds
    # Every Job completed above; each round had a Service of its own.
    assert len(services) == ROUNDS
    # The check's ServiceAccount, Role, binding, policy and Job are gone once it succeeded.
    assert node.kubectl("get", "job,serviceaccount", "-n", NAMESPACE, "-o", "name").stdout.count("install-check") == 0
    assert "install-check" not in node.kubectl("get", "role,rolebinding", "-n", "default", "-o", "name").stdout


def check_hook_runs(node):
    """(started, phase) of each run of the install check's Job, as Helm recorded it."""
    status = json.loads(node.helm("status", "shmguard", "-n", NAMESPACE, "-o", "json").stdout)
    return [(h["last_run"]["started_at"], h["last_run"]["phase"]) for h in status.get("hooks", [])
            if h["kind"] == "Job" and h["name"] == "shmguard-install-check"]


def test_helm_upgrade_wait_runs_the_check_again(release):
    node = release
    before = check_hook_runs(node)
    for headroom in ("1.6", "1.5"):
        r = node.helm("upgrade", "shmguard", str(SRC / "charts" / "shmguard"), "-n", NAMESPACE, *IMAGE_VALUES,
                      "--reuse-values", "--set", f"config.sizing.headroom={headroom}", "--wait", "--timeout", "180s",
                      timeout=300)
        assert "STATUS: deployed" in r.stdout, r.stdout
        runs = check_hook_runs(node)
        assert len(runs) == 1 and runs[0][1] == "Succeeded" and runs != before, (before, runs)
        before = runs
        # The next pod, at once: injected with the new config's size.
        assert injected_dry_run(node)
    assert node.kubectl("get", "job", "-n", NAMESPACE, "-o", "name").stdout.count("install-check") == 0


UNREACHABLE_NS = "shmguard-unreachable"
CHECK_NS = NAMESPACE
CHECK_SA = "shmguard-install-check"


@pytest.fixture(scope="module")
def failed_install(release):
    """A second release whose webhook selects no namespace: the install check's dry runs come back
    unchanged until installCheck.timeout, and the install fails. Its dry runs go to the first
    release's namespace, which no webhook selects (the first release's would answer anywhere else). Its check Job, ServiceAccount and
    Role stay behind (only a successful check removes them): the tests read them."""
    node = release
    r, seconds = helm_install(node, "--set", "installCheck.timeout=8s", "--set", f"installCheck.namespace={CHECK_NS}",
                              "--set", "webhook.namespaceSelector.matchLabels.shmguard-test=nothing-has-this",
                              release="shmguard", namespace=UNREACHABLE_NS)
    yield node, r, seconds
    node.helm("uninstall", "shmguard", "-n", UNREACHABLE_NS, "--wait", check=False, timeout=240)
    for kind, where in (("job", UNREACHABLE_NS), ("serviceaccount", UNREACHABLE_NS), ("role", CHECK_NS),
                        ("rolebinding", CHECK_NS)):
        node.kubectl("delete", kind, CHECK_SA, "-n", where, "--ignore-not-found", check=False)
    node.kubectl("delete", "validatingadmissionpolicy,validatingadmissionpolicybinding",
                 f"{CHECK_SA}-{UNREACHABLE_NS}", "--ignore-not-found", check=False)
    node.kubectl("delete", "namespace", UNREACHABLE_NS, "--wait=false", check=False)


def test_a_webhook_the_api_server_cannot_reach_fails_the_install_saying_why(failed_install):
    node, r, seconds = failed_install
    assert r.returncode != 0, r.stdout
    assert re.search(r"failed post-install.*job shmguard-install-check failed", r.stderr, re.S), r.stderr
    log = node.logs("-n", UNREACHABLE_NS, "job/shmguard-install-check")
    assert re.search(r"no answer from shmguard through the API server within 8s \(\d+ dry runs in namespace "
                     rf"{CHECK_NS}\); the last: admitted without shmguard's answer", log), log
    assert f"Service {UNREACHABLE_NS}/shmguard" in log and "installCheck.namespace" in log, log
    assert f"kubectl -n {UNREACHABLE_NS} get endpoints shmguard" in log, log
    assert seconds < 120, seconds  # the check's own timeout, not Helm's 180 s
    sys.stderr.write(f"node: an unreachable webhook failed helm install in {seconds:.1f}s; the check said:\n{log}\n")


def as_check_sa(node, *args, stdin=None):
    """kubectl as the install check's ServiceAccount (a token from the TokenRequest API), not the admin."""
    token = node.kubectl("create", "token", CHECK_SA, "-n", UNREACHABLE_NS).stdout.strip()
    cfg = json.loads(node.kubectl("config", "view", "--raw", "-o", "json").stdout)
    cluster = cfg["clusters"][0]["cluster"]
    ca = node.dir / "check-sa-ca.crt"
    if "certificate-authority" in cluster:
        ca = cluster["certificate-authority"]
    else:
        import base64
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    return node.kubectl("--kubeconfig=/dev/null", f"--server={cluster['server']}", f"--certificate-authority={ca}",
                        f"--token={token}", *args, stdin=stdin, check=False)


def test_the_check_service_account_makes_dry_runs_and_nothing_else(failed_install):
    node, _, _ = failed_install
    pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "probe-"},
                      "spec": {"containers": [{"name": "c", "image": "probe"}]}})
    dry = as_check_sa(node, "create", "-n", CHECK_NS, "--dry-run=server", "-f", "-", "-o", "name", stdin=pod)
    assert dry.returncode == 0, dry.stderr
    real = as_check_sa(node, "create", "-n", CHECK_NS, "-f", "-", stdin=pod)
    assert real.returncode != 0 and "may only make dry runs" in real.stderr, real.stdout + real.stderr
    for args in (["get", "secrets", "-n", UNREACHABLE_NS], ["get", "secrets", "-n", CHECK_NS],
                 ["get", "pods", "-n", CHECK_NS], ["create", "-n", "default", "--dry-run=server", "-f", "-"],
                 ["delete", "pods", "--all", "-n", CHECK_NS, "--dry-run=server"]):
        r = as_check_sa(node, *args, stdin=pod)
        assert r.returncode != 0 and "forbidden" in r.stderr.lower(), (args, r.stdout, r.stderr)
    # (`can-i create pods/exec` would ask about a pod named exec: subresources go in --subresource.)
    for verb, where in (("create pods --subresource=exec", CHECK_NS), ("get nodes", CHECK_NS), ("create deployments", CHECK_NS),
                        ("update pods", CHECK_NS), ("create pods", "default"), ("get secrets", UNREACHABLE_NS)):
        r = as_check_sa(node, "auth", "can-i", *verb.split(), "-n", where)
        assert r.stdout.strip() == "no", (verb, where, r.stdout, r.stderr)
    assert as_check_sa(node, "auth", "can-i", "create", "pods", "-n", CHECK_NS).stdout.strip() == "yes"
    assert not [p for p in node.get("pods", "-A")["items"] if p["metadata"]["name"].startswith("probe-")], \
        "a pod was stored"
