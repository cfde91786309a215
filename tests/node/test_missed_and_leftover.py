"""Pods shmguard missed, on the real node: three training pods really running with the container
runtime's 64 MiB /dev/shm, each missed for its own reason, as a cluster admin meets them:

- `early` was created before README's `helm install` (conftest's `before_install`, which the
  session's release waits for);
- `outside` runs in a namespace the admin left out (webhook.excludeNamespaces);
- `while-down` was created while the webhook had no ready pod: the API server admitted it without
  an answer (failurePolicy Ignore), and counted it in apiserver_admission_webhook_fail_open_count.

`shmguard top` and the chart's monitor (its metrics and Events) name each one unprotected with its
reason; a pod created once the webhook is back is not.

Then a container that dies leaving a file in its /dev/shm: the monitor reports what the dead
process left (the kubelet's du of the volume) with a metric and an Event."""
import json
import re
import sys
import time

import pytest

from pylib.node import EARLY_NS, NAMESPACE, injected_dry_run, pod_json, shm_volume
from pylib.paths import BIN, SRC
import subprocess

HINTS = {"shmguard.io/batch-size": "32", "shmguard.io/num-workers": "4", "shmguard.io/sample-size": "1Mi"}
LABELS = {"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker"}
SEL_NS, OUT_NS = "missed-selected", "missed-outside"


def worker(name):
    return pod_json(name, annotations=dict(HINTS), labels=dict(LABELS), command=["sleep", "600"],
                    terminationGracePeriodSeconds=1)


def running(node, ns, name):
    return node.get("pod", name, "-n", ns).get("status", {}).get("phase") == "Running"


def fail_opens(node):
    text = node.kubectl("get", "--raw", "/metrics").stdout
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_admission_webhook_fail_open_count{") and 'name="pods.shmguard.io"' in line)


@pytest.fixture(scope="module")
def missed(release):
    node = release
    t0 = time.time()
    node.helm("upgrade", "shmguard", str(SRC / "charts" / "shmguard"), "-n", NAMESPACE, "--reuse-values", "--set",
              f"monitor.enabled=true,monitor.period=5s,webhook.excludeNamespaces={{{OUT_NS}}}", "--wait",
              "--timeout", "180s", timeout=300)
    sys.stderr.write(f"missed pods: helm upgrade (monitor on, {OUT_NS} excluded) took {time.time() - t0:.1f}s\n")
    node.namespace(SEL_NS)
    node.namespace(OUT_NS)
    node.apply(worker("outside"), "-n", OUT_NS)
    # The webhook down: no ready pod behind its Service.
    node.kubectl("scale", "deployment", "shmguard", "-n", NAMESPACE, "--replicas=0")
    node.wait("the webhook's pods gone", lambda: not node.get("pods", "-n", NAMESPACE, "-l",
                                                              "app.kubernetes.io/name=shmguard,app.kubernetes.io/instance=shmguard")["items"],
              timeout=120)
    before = fail_opens(node)
    node.apply(worker("while-down"), "-n", SEL_NS)
    counted = fail_opens(node) - before
    node.kubectl("scale", "deployment", "shmguard", "-n", NAMESPACE, "--replicas=2")
    node.kubectl("rollout", "status", "deployment/shmguard", "-n", NAMESPACE, "--timeout=180s", timeout=200)
    # Back: as the chart's install check does, a dry run through the API server comes back injected.
    node.wait("the webhook answering again", lambda: injected_dry_run(node), timeout=120)
    node.apply(worker("after"), "-n", SEL_NS)
    for ns, name in ((EARLY_NS, "early"), (OUT_NS, "outside"), (SEL_NS, "while-down"), (SEL_NS, "after")):
        node.wait(f"{ns}/{name} running", lambda: running(node, ns, name), timeout=180)
    try:
        yield node, counted
    finally:
        for ns in (SEL_NS, OUT_NS):  # EARLY_NS stays: the session's other tests may still list it
            node.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        node.helm("upgrade", "shmguard", str(SRC / "charts" / "shmguard"), "-n", NAMESPACE, "--reuse-values", "--set",
                  "monitor.enabled=false,webhook.excludeNamespaces=null", "--wait", "--timeout", "180s", timeout=300,
                  check=False)


WANT = {(EARLY_NS, "early"): "before-install", (OUT_NS, "outside"): "namespace-not-selected",
        (SEL_NS, "while-down"): "failed-open"}


def test_the_api_server_admitted_the_pod_without_the_webhook(missed):
    node, counted = missed
    assert counted >= 1
    assert shm_volume(node.get("pod", "while-down", "-n", SEL_NS)) is None
    assert shm_volume(node.get("pod", "after", "-n", SEL_NS)) is not None


def test_top_names_each_missed_pod_and_why(missed):
    node, _ = missed
    r = subprocess.run([BIN, "top", "-A", "-o", "json"], capture_output=True, text=True, env=node.env, timeout=120)
    items = {(i["namespace"], i["pod"]): i for i in json.loads(r.stdout)["items"]}
    for key, reason in WANT.items():
        assert items[key]["unprotected"] and items[key]["unprotected"]["reason"] == reason, (key, items.get(key))
        assert items[key]["volume"] == ""
    assert items[(SEL_NS, "after")]["unprotected"] is None and items[(SEL_NS, "after")]["volume"] == "shmguard-dshm"
    need = items[(SEL_NS, "while-down")]["unprotected"]["need"]
    assert need == node.get("pod", "after", "-n", SEL_NS)["metadata"]["annotations"]["shmguard.io/injected-size"]
    # The pod's own /dev/shm is the runtime's 64 MiB, as the message says.
    df = node.kubectl("exec", "-n", SEL_NS, "while-down", "--", "df", "-k", "/dev/shm").stdout.splitlines()[-1].split()
    assert int(df[1]) == 65536, df
    r = subprocess.run([BIN, "top", "-n", SEL_NS], capture_output=True, text=True, env=node.env, timeout=120)
    assert r.stdout.splitlines()[0].split()[-1] == "UNPROTECTED", r.stdout
    assert f"unprotected: {SEL_NS}/while-down: training pod without the /dev/shm it needs ({need})" in r.stdout


def test_the_monitor_exports_them_and_writes_an_event_on_each(missed):
    node, _ = missed

    def exported():
        r = node.kubectl("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/services/http:shmguard-monitor:metrics/proxy/metrics",
                         check=False)
        text = r.stdout if r.returncode == 0 else ""
        got = {(m.group(1), m.group(2)): m.group(3) for m in re.finditer(
            r'shmguard_pod_unprotected\{namespace="([^"]*)",pod="([^"]*)",[^}]*reason="([^"]*)"\} 1', text)}
        return (text, got) if all(got.get(k) == v for k, v in WANT.items()) else None
    text, got = node.wait("the monitor's unprotected pods", exported, timeout=120, every=2)
    assert (SEL_NS, "after") not in got
    for (ns, _), reason in WANT.items():
        assert f'shmguard_unprotected_pods{{namespace="{ns}",reason="{reason}"}} 1\n' in text
    for (ns, name), reason in WANT.items():
        events = node.wait(f"the ShmUnprotected Event on {ns}/{name}", lambda: [
            e for e in node.get("events", "-n", ns)["items"]
            if e["reason"] == "ShmUnprotected" and e["involvedObject"]["name"] == name] or None, timeout=60)
        assert len(events) == 1 and events[0]["type"] == "Warning"
        assert "ShmUnprotected" in node.kubectl("describe", "pod", name, "-n", ns).stdout
    assert not [e for e in node.get("events", "-n", SEL_NS)["items"]
                if e["reason"] == "ShmUnprotected" and e["involvedObject"]["name"] == "after"]


LEFT = 200 << 20
# The first run leaves 200Mi in a file and dies; the restarted one finds it and only sleeps.
CRASH = f"if [ -e /dev/shm/left ]; then exec sleep 600; fi; head -c {LEFT} /dev/zero > /dev/shm/left; exit 3"


def test_what_a_dead_process_left_in_dev_shm_is_reported(missed):
    node, _ = missed
    p = pod_json("crashy", annotations={"shmguard.io/size": "1Gi"}, command=["sh", "-c", CRASH],
                 restartPolicy="OnFailure", terminationGracePeriodSeconds=1)
    node.apply(p, "-n", SEL_NS)
    t0 = time.time()

    def reported():
        r = node.kubectl("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/services/http:shmguard-monitor:metrics/proxy/metrics",
                         check=False)
        m = re.search(rf'shmguard_shm_leftover_bytes\{{namespace="{SEL_NS}",pod="crashy",[^}}]*\}} (\d+)', r.stdout)
        return int(m.group(1)) if m else None
    left = node.wait("the monitor's leftover figure", reported, timeout=240, every=2)
    sys.stderr.write(f"leftover: {left} bytes reported {time.time() - t0:.0f}s after the pod was created\n")
    status = node.get("pod", "crashy", "-n", SEL_NS)["status"]["containerStatuses"][0]
    assert status["restartCount"] >= 1 and status["lastState"]["terminated"]["exitCode"] == 3
    assert LEFT <= left <= LEFT + (1 << 20), left  # the file, as the kubelet's du counts it
    events = node.wait("the ShmLeftover Event", lambda: [e for e in node.get("events", "-n", SEL_NS)["items"]
                                                         if e["reason"] == "ShmLeftover"] or None, timeout=60)
    assert len(events) == 1 and events[0]["involvedObject"]["name"] == "crashy"
    msg = events[0]["message"]
    assert "container train restarted (exit code 3 at " in msg and "still holds 200Mi of files" in msg, msg
