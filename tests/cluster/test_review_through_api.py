"""`shmguard review --through-api-server`, the chart's install check, against the real kube-apiserver:
the built-in test pod is created as a server-side dry run with a ServiceAccount's token, and
`--wait` asks again until shmguard answers. Here the webhook configuration first points where
nothing listens (the API server admits the pod unchanged: failurePolicy Ignore), then at a running
`shmguard serve`: the review must keep asking and report the answer. Without an answer it fails
with what the API server did and what to look at; without RBAC it says the API server refused.
Nothing is ever stored."""
import json
import re
import subprocess
import threading
import time

import pytest

from pylib.cluster import serve, webhook_config
from pylib.paths import BIN

SA = "install-check"


@pytest.fixture(scope="module")
def api(cluster, tmp_path_factory):
    """(server URL, CA, token file) for a ServiceAccount that may create pods in namespace review-ns."""
    d = tmp_path_factory.mktemp("review-api")
    ns = cluster.namespace("review-ns", {"shmguard-test": "review"})
    cluster.namespace("review-other", {"shmguard-test": "review"})
    cluster.kubectl("create", "serviceaccount", SA, "-n", ns)
    cluster.kubectl("create", "role", SA, "--verb=create", "--resource=pods", "-n", ns)
    cluster.kubectl("create", "rolebinding", SA, f"--role={SA}", f"--serviceaccount={ns}:{SA}", "-n", ns)
    token = d / "token"
    token.write_text(cluster.kubectl("create", "token", SA, "-n", ns).stdout.strip() + "\n")
    cfg = json.loads(cluster.kubectl("config", "view", "--raw", "-o", "json").stdout)["clusters"][0]["cluster"]
    return cfg["server"], cfg["certificate-authority"], str(token)


def review(api, *args, timeout=120):
    server, ca, token = api
    return subprocess.run([BIN, "review", "--through-api-server", "--server", server, "--ca", ca, "--token-file", token,
                           "--test-pod", *args], capture_output=True, text=True, timeout=timeout)


def test_waits_until_the_webhook_answers_through_the_api_server(cluster, api, url_certs):
    server = serve(url_certs)
    ca = (url_certs / "ca.crt").read_bytes()
    dead = serve(url_certs)
    dead_port = dead.port
    dead.stop()  # nothing listens there: the API server cannot call the webhook and admits pods unchanged
    cluster.apply(webhook_config("review", ca, url=f"https://127.0.0.1:{dead_port}/mutate", failure="Ignore",
                                 selector={"shmguard-test": "review"}))
    try:
        switch = threading.Timer(4.0, lambda: cluster.apply(webhook_config(
            "review", ca, url=f"https://127.0.0.1:{server.port}/mutate", failure="Ignore",
            selector={"shmguard-test": "review"})))
        switch.start()
        t0 = time.time()
        r = review(api, "--namespace", "review-ns", "--wait", "60s", "--expect-injected",
                   "--webhook-service", "shmguard/shmguard")
        switch.join()
        assert r.returncode == 0, r.stdout + r.stderr
        m = re.fullmatch(r"<test-pod>:1 Pod/shmguard-review-\* \(pod\) -> patched: /dev/shm 1Gi \(through the API server, namespace "
                         r"review-ns; answered after (\d+\.\d)s, attempt (\d+)\)\n", r.stdout)
        assert m, r.stdout
        # (The figure is rounded to a tenth: up to 0.05 s above what this clock saw.)
        assert 4.0 <= float(m.group(1)) <= time.time() - t0 + 0.05 and int(m.group(2)) > 3, r.stdout
        # While the webhook could not be called, what the API server did, said once.
        assert r.stderr.count("admitted without shmguard's answer (no /dev/shm volume, no shmguard warning)") == 1, r.stderr
        # The dry runs stored nothing; the webhook saw them as dry runs.
        assert cluster.get("pods", "-n", "review-ns")["items"] == []
        answered = [l for l in server.logs() if l.get("msg") == "admission" and l.get("namespace") == "review-ns"]
        assert answered and answered[-1]["decision"] == "injected" and answered[-1]["size"] == "1Gi", answered
    finally:
        server.stop()
        cluster.kubectl("delete", "mutatingwebhookconfiguration", "review", "--ignore-not-found")


def test_no_answer_in_time_fails_saying_what_the_api_server_did(cluster, api):
    t0 = time.time()
    r = review(api, "--namespace", "review-ns", "--wait", "3s", "--webhook-service", "shmguard/shmguard")
    assert r.returncode == 1, r.stdout + r.stderr
    assert time.time() - t0 < 15
    assert r.stdout == ""
    assert re.search(r"shmguard review: <test-pod>:1 Pod/shmguard-review-\* \(pod\): no answer from shmguard through the API server within "
                     r"3s \(\d+ dry runs in namespace review-ns\); the last: admitted without shmguard's answer", r.stderr)
    assert "could not call the webhook through Service shmguard/shmguard" in r.stderr, r.stderr
    assert "`kubectl -n shmguard get endpoints shmguard` must list ready pods" in r.stderr, r.stderr
    assert "set the chart's installCheck.namespace to a namespace it selects" in r.stderr, r.stderr


def test_without_rbac_the_api_server_refusal_is_named(cluster, api):
    r = review(api, "--namespace", "review-other", "--wait", "2s")
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"the API server answered HTTP 403: pods is forbidden: User \"system:serviceaccount:review-ns:"
                     r"install-check\" cannot create resource \"pods\" in API group \"\" in the namespace "
                     r"\"review-other\"", r.stderr), r.stderr
    assert "RBAC: the check's Role must allow `create pods` in namespace review-other" in r.stderr


def test_bad_flags_are_refused_with_a_message(cluster, api):
    r = review(api, "--wait", "two minutes")
    assert r.returncode == 2 and 'review: --wait: "two minutes" is not a duration (90s, 2m, 1h30m)' in r.stderr, r.stderr
    r = subprocess.run([BIN, "review", "--server", "https://127.0.0.1:1", "--ca", api[1], "--test-pod", "--wait", "5s"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "review: --wait needs --through-api-server" in r.stderr, r.stderr
    r = subprocess.run([BIN, "review", "--through-api-server", "--test-pod"], capture_output=True, text=True,
                       timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "KUBERNETES_SERVICE_HOST/PORT are not set" in r.stderr, r.stderr
    r = subprocess.run([BIN, "review", "--through-api-server", "--server", "http://127.0.0.1:1", "--test-pod"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and '--server must be an https:// URL, got "http://127.0.0.1:1"' in r.stderr, r.stderr
