"""The API server's own word on the webhook: with shmguard stopped and failurePolicy Ignore, the real
kube-apiserver counts each pod it admitted without an answer in
apiserver_admission_webhook_fail_open_count, and the chart's ShmguardWebhookFailedOpen rule fires on
the samples read from its /metrics (promtool evaluates the chart's rules over them)."""
import json
import re
import shutil
import subprocess
import time

import pytest
import yaml

from pylib.cluster import serve, webhook_config
from pylib.paths import SRC

CHART = SRC / "charts" / "shmguard"


def fail_open_samples(cluster, hook):
    """The API server's fail-open samples for webhook HOOK: {labels text: value}."""
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"apiserver_admission_webhook_fail_open_count\{([^}]*)\} (\S+)", line)
        if m and f'name="{hook}"' in m.group(1):
            out[m.group(1)] = float(m.group(2))
    return out


def test_pods_admitted_while_shmguard_is_down_are_counted_and_alerted(cluster, url_certs, tmp_path):
    promtool = shutil.which("promtool", path=cluster.env.get("PATH"))
    helm = shutil.which("helm", path=cluster.env.get("PATH"))
    if not (promtool and helm):
        pytest.skip("promtool and helm come from hack/testbin.sh")
    # The chart's rules select its webhook by the name the chart gives it.
    rendered = subprocess.run([helm, "template", "shmguard", str(CHART), "-n", "ml-system", "--set",
                               "monitor.enabled=true", "--set", "monitor.prometheusRule.enabled=true"],
                              capture_output=True, text=True, check=True).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    hook = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")["webhooks"][0]["name"]
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    config = hook.split(".")[0]
    assert f"{config}.shmguard.io" == hook

    server = serve(url_certs)
    port = server.port
    ca = (url_certs / "ca.crt").read_bytes()
    server.stop()  # nothing listens on the URL any more
    before = fail_open_samples(cluster, hook)
    try:
        cluster.apply(webhook_config(config, ca, url=f"https://127.0.0.1:{port}/mutate", failure="Ignore"))
        ns = cluster.namespace("fail-open", {"shmguard-test": config})
        # The API server loads webhook configurations asynchronously: create pods until one is admitted
        # through the webhook's failure (the counter rises), each admitted unchanged.
        deadline = time.time() + 30
        for n in range(1000):
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{n}", "labels": {"shmguard.io/inject": "true"}},
                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
            out = json.loads(cluster.kubectl("create", "-n", ns, "-o", "json", "-f", "-", stdin=json.dumps(pod)).stdout)
            assert all(v["name"] != "shmguard-dshm" for v in out["spec"].get("volumes") or [])
            after = fail_open_samples(cluster, hook)
            if sum(after.values()) > sum(before.values()):
                break
            assert time.time() < deadline, "the API server never counted a fail-open"
            time.sleep(0.3)
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", config, "--ignore-not-found")
    (labels, value), = after.items()
    assert 'type="admit"' in labels and value >= 1

    # The real samples as Prometheus would have scraped them each minute: the series absent before
    # (or at its earlier value) for 15 minutes, then the value read now.
    was = before.get(labels)
    series = "apiserver_admission_webhook_fail_open_count{%s,instance=\"apiserver\"}" % labels
    values = (f"{was:g}x14" if was is not None else "_x14") + f" {value:g}x20"
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [{"series": series, "values": values}],
        "promql_expr_test": [{"expr": 'ALERTS{alertname="ShmguardWebhookFailedOpen",alertstate="firing"}',
                              "eval_time": "16m",
                              "exp_samples": [{"labels": 'ALERTS{alertname="ShmguardWebhookFailedOpen",'
                                                         f'alertstate="firing",name="{hook}",severity="warning"}}',
                                               "value": 1}]},
                             {"expr": 'ALERTS{alertname="ShmguardWebhookFailedOpen"}', "eval_time": "13m",
                              "exp_samples": []}]}]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    r = subprocess.run([promtool, "test", "rules", str(tmp_path / "tests.yaml")], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, f"{values}\n{r.stdout}{r.stderr}"
