"""shmguard in the tools users already run: check's --fail-on and output formats, --exclude and
--skip-invalid, mutate -i, Helm's post-renderer, kustomize/kpt's KRM function (golden
ResourceLists and real kustomize), the kubectl plugin, the pre-commit hook, audit mode, `review`
against a running webhook, and the small things a newcomer hit."""
import json
import os
import re
import shutil
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from pylib.cli import run
from pylib.paths import BIN, SRC
from pylib.webhook import Server, review, training_pod

EXAMPLES = SRC / "examples"
FN = SRC / "tests" / "golden" / "fn"
TESTBIN = os.environ.get("SHMGUARD_TESTBIN", "")


def tool(name):
    p = Path(TESTBIN) / name if TESTBIN else None
    return str(p) if p and p.exists() else shutil.which(name)


# ---- check: what fails, and in which format ----

def test_fail_on_chooses_what_fails(tmp_path):
    r = run("check", "-f", str(EXAMPLES))
    assert r.returncode == 1
    # A cluster that runs the webhook only cares about user volumes that are too small or stale.
    r = run("check", "-f", str(EXAMPLES), "--fail-on", "too-small,stale")
    assert r.returncode == 1 and "1 fails (--fail-on too-small,stale)" in r.stdout, r.stdout
    r = run("check", "-f", str(EXAMPLES / "pod-pytorch-image.yaml"), "--fail-on", "too-small,stale")
    assert r.returncode == 0 and "would inject 8Gi" in r.stdout
    typo = tmp_path / "typo.yaml"
    typo.write_text((SRC / "tests/golden/40-typo-annotation.yaml").read_text())
    assert run("check", "-f", str(typo), "--fail-on", "too-small").returncode == 0
    r = run("check", "-f", str(typo), "--fail-on", "warning")
    assert r.returncode == 1
    assert f"{typo}:6: warning: unknown annotation shmguard.io/batchsize; did you mean shmguard.io/batch-size?" in r.stdout
    r = run("check", "-f", str(typo), "--fail-on", "bogus")
    assert r.returncode == 2 and "unknown finding" in r.stderr
    assert run("check", "-f", str(EXAMPLES), "--fail-on", "none").returncode == 0


def test_text_summary_is_singular_for_one():
    r = run("check", "-f", str(EXAMPLES / "pod-pytorch-image.yaml"))
    assert r.stdout.splitlines()[-1].startswith("1 pod template: 1 would get /dev/shm"), r.stdout


def test_output_yaml_is_not_a_check_format():
    r = run("check", "-f", str(EXAMPLES), "-o", "yaml")
    assert r.returncode == 2 and r.stdout == "" and "yaml" in r.stderr


def test_json_report_has_records_and_totals():
    r = run("check", "-f", str(EXAMPLES), "-o", "json")
    rep = json.loads(r.stdout)
    assert rep["totals"]["templates"] == len(rep["items"]) == 5
    assert rep["totals"]["failed"] == 3 and rep["totals"]["findings"]["missing"] == 2
    small = [i for i in rep["items"] if i["name"] == "bert-finetune"][0]
    assert small["decision"] == "too small: has 1Gi, needs 2752Mi" and small["existing"] == "1Gi"
    assert small["size"] == "2752Mi" and small["line"] == 9 and small["template"] == "spec.template"
    assert {"file", "line", "kind", "name", "template", "decision", "size", "warnings"} <= set(small)


def test_junit_has_a_testcase_per_template_and_failures_per_fail_on():
    r = run("check", "-f", str(EXAMPLES), "-o", "junit")
    root = ET.fromstring(r.stdout)
    cases = root.findall(".//testcase")
    assert len(cases) == 5 and root.get("tests") == "5" and root.get("failures") == "3"
    failed = {c.get("name"): [f.get("type") for f in c.findall("failure")] for c in cases if c.find("failure") is not None}
    assert failed == {"Job/bert-finetune spec.template": ["too-small"],
                      "Pod/notebook-train (pod)": ["missing"],
                      "PyTorchJob/resnet50 spec.pytorchReplicaSpecs.Worker.template": ["missing"]}
    r = run("check", "-f", str(EXAMPLES), "-o", "junit", "--fail-on", "too-small")
    assert ET.fromstring(r.stdout).get("failures") == "1"


def test_sarif_is_2_1_0_with_rules_and_physical_locations():
    r = run("check", "-f", str(EXAMPLES), "-o", "sarif")
    s = json.loads(r.stdout)
    assert s["version"] == "2.1.0" and "sarif-2.1.0" in s["$schema"]
    driver = s["runs"][0]["tool"]["driver"]
    assert [rule["id"] for rule in driver["rules"]] == ["missing", "too-small", "stale", "warning", "rejected"]
    results = s["runs"][0]["results"]
    by_rule = {}
    for res in results:
        loc = res["locations"][0]["physicalLocation"]
        by_rule.setdefault(res["ruleId"], []).append((Path(loc["artifactLocation"]["uri"]).name, loc["region"]["startLine"], res["level"]))
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
    assert sorted(by_rule["missing"]) == [("pod-pytorch-image.yaml", 2, "error"), ("pytorchjob-resnet.yaml", 14, "error")]
    assert by_rule["too-small"] == [("job-small-shm.yaml", 9, "error")]
    assert by_rule["warning"] == [("job-small-shm.yaml", 9, "warning")]


def test_github_annotations():
    r = run("check", "-f", str(EXAMPLES), "-o", "github")
    lines = r.stdout.splitlines()
    pat = re.compile(r"^::(error|warning) file=([^,]+),line=(\d+),title=shmguard ([a-z-]+)::(.+)$")
    parsed = [pat.match(l) for l in lines]
    assert all(parsed), lines
    errors = sorted((Path(m.group(2)).name, int(m.group(3)), m.group(4)) for m in parsed if m.group(1) == "error")
    assert errors == [("job-small-shm.yaml", 9, "too-small"), ("pod-pytorch-image.yaml", 2, "missing"),
                      ("pytorchjob-resnet.yaml", 14, "missing")]
    assert r.returncode == 1


def test_exclude_and_skip_invalid(tmp_path):
    for p in EXAMPLES.iterdir():
        shutil.copy(p, tmp_path)
    (tmp_path / "values.yaml").write_text("- just\n- a list\n")
    (tmp_path / "helm-values.yaml").write_text("replicaCount: 2\nimage:\n  repository: x\n")  # YAML, not an object
    r = run("check", "-f", str(tmp_path))
    assert r.returncode == 2 and "values.yaml" in r.stderr and r.stdout == ""
    r = run("check", "-f", str(tmp_path), "--skip-invalid")
    assert r.returncode == 1, r.stderr
    # Each skip is printed once, in the report.
    assert (r.stdout + r.stderr).count("/values.yaml: skipped (--skip-invalid)") == 1, r.stdout + r.stderr
    assert (r.stdout + r.stderr).count("/helm-values.yaml: skipped (--skip-invalid)") == 1, r.stdout + r.stderr
    assert "helm-values.yaml:1: document 1 is not a Kubernetes object: missing 'kind' key" in r.stdout
    r = run("check", "-f", str(tmp_path), "--exclude", "*values.yaml", "--exclude", "job-*")
    assert r.returncode == 1 and "bert-finetune" not in r.stdout and "4 pod templates" in r.stdout


# ---- mutate: in place, Helm post-renderer ----

def test_mutate_in_place_rewrites_only_changed_files(tmp_path):
    for p in EXAMPLES.iterdir():
        shutil.copy(p, tmp_path)
    job = tmp_path / "pytorchjob-resnet.yaml"
    os.chmod(job, 0o640)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    time.sleep(0.02)
    r = run("mutate", "-i", "-f", str(tmp_path))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    changed = {p.name for p in tmp_path.iterdir() if p.read_bytes() != before[p.name][0]}
    assert changed == {"pytorchjob-resnet.yaml", "pod-pytorch-image.yaml"}
    for p in tmp_path.iterdir():
        if p.name not in changed:
            assert p.stat().st_mtime_ns == before[p.name][1], f"{p.name} was touched"
    assert job.stat().st_mode & 0o777 == 0o640
    assert not list(tmp_path.glob("*.shmguard-*")), "no temporary files left"
    assert f"{job}: rewritten" in r.stderr
    # The result is what `mutate` prints, and a second run changes nothing.
    assert job.read_text() == run("mutate", "-f", str(EXAMPLES / "pytorchjob-resnet.yaml")).stdout
    mtimes = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert run("mutate", "-i", "-f", str(tmp_path)).returncode == 0
    assert mtimes == {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert run("mutate", "-i", "-f", "-", stdin="a: 1\n").returncode == 2


def post_render(command, manifests):
    """Helm's post-renderer protocol: every rendered manifest on stdin, the result on stdout, a
    non-zero exit on error (Helm then fails the release)."""
    p = subprocess.run(command, input=manifests, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_helm_post_renderer_protocol():
    rendered = "---\n# Source: chart/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n" + \
               "---\n# Source: chart/templates/job.yaml\n" + (EXAMPLES / "pytorchjob-resnet.yaml").read_text()
    code, out, err = post_render([BIN, "mutate"], rendered)
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == ["ConfigMap", "PyTorchJob"]
    vols = docs[1]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"]
    assert {"name": "shmguard-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4481Mi"}} in vols
    code, out, err = post_render([BIN, "mutate"], "a: [1,\n")
    assert code != 0 and out == "" and "<stdin>:" in err


@pytest.mark.skipif(not tool("helm"), reason="helm not built (hack/testbin.sh)")
def test_real_helm_template_with_post_renderer(tmp_path):
    chart = tmp_path / "train"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: train\nversion: 0.1.0\n")
    (chart / "templates" / "job.yaml").write_text((EXAMPLES / "pytorchjob-resnet.yaml").read_text())
    r = subprocess.run([tool("helm"), "template", "rel", str(chart), "--post-renderer", BIN,
                        "--post-renderer-args", "mutate"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    job = [d for d in yaml.safe_load_all(r.stdout) if d][0]
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"][
        "shmguard.io/injected-size"] == "4481Mi"


# ---- KRM function ----

@pytest.mark.parametrize("name", sorted(p.name for p in FN.glob("*.yaml") if ".golden." not in p.name))
def test_fn_golden_resource_lists(name):
    src = FN / name
    r = run("fn", stdin=src.read_text())
    assert r.returncode == 0, r.stderr
    golden = FN / name.replace(".yaml", ".golden.yaml")
    if os.environ.get("REFRESH_GOLDEN"):
        golden.write_text(r.stdout)
    assert r.stdout == golden.read_text()
    out = yaml.safe_load(r.stdout)
    assert out["kind"] == "ResourceList" and isinstance(out["results"], list)
    for res in out["results"]:
        assert res["severity"] in ("info", "warning", "error") and res["message"]


def test_fn_results_name_resource_and_file():
    out = yaml.safe_load(run("fn", stdin=(FN / "02-deployment-and-pytorchjob.yaml").read_text()).stdout)
    assert out["items"][0]["spec"]["template"]["spec"]["containers"][0].get("volumeMounts") is None
    res = [r for r in out["results"] if r["severity"] == "info"]
    assert res == [{"message": "injected 4481Mi" if False else res[0]["message"], "severity": "info",
                    "resourceRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "resnet",
                                    "namespace": "ml"},
                    "field": {"path": "spec.pytorchReplicaSpecs.Worker.template"},
                    "file": {"path": "train/resnet.yaml", "index": 1}}]
    assert res[0]["message"].startswith("injected ")
    assert run("fn", stdin="apiVersion: v1\nkind: Pod\n").returncode == 1
    # An earlier function's results stay first, and block YAML stays block YAML.
    r = run("fn", stdin=(FN / "03-too-small-and-stale.yaml").read_text())
    assert r.stdout.startswith("apiVersion: config.kubernetes.io/v1\n")
    out = yaml.safe_load(r.stdout)
    assert out["results"][0] == {"message": "from an earlier function", "severity": "info"}
    assert [x["severity"] for x in out["results"][1:]] == ["warning", "warning"]


@pytest.mark.skipif(not tool("kustomize"), reason="kustomize not built (hack/testbin.sh)")
def test_real_kustomize_exec_function(tmp_path):
    shutil.copy(EXAMPLES / "pod-pytorch-image.yaml", tmp_path / "pod.yaml")
    (tmp_path / "shmguard-fn").write_text(f"#!/bin/sh\nexec {BIN} fn\n")
    os.chmod(tmp_path / "shmguard-fn", 0o755)
    (tmp_path / "fn.yaml").write_text(
        "apiVersion: shmguard.io/v1\nkind: ShmguardInjector\nmetadata:\n  name: shmguard\n  annotations:\n"
        "    config.kubernetes.io/function: |\n      exec:\n        path: ./shmguard-fn\n")
    (tmp_path / "kustomization.yaml").write_text("resources:\n- pod.yaml\ntransformers:\n- fn.yaml\n")
    r = subprocess.run([tool("kustomize"), "build", "--enable-alpha-plugins", "--enable-exec", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pod = yaml.safe_load(r.stdout)
    assert {"name": "shmguard-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["spec"]["volumes"]
    assert pod["metadata"]["annotations"]["shmguard.io/injected-size"] == "8Gi"


# ---- kubectl plugin, pre-commit ----

@pytest.mark.skipif(not tool("kubectl"), reason="kubectl not available")
def test_kubectl_plugin(tmp_path):
    os.symlink(BIN, tmp_path / "kubectl-shmguard")
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    r = subprocess.run([tool("kubectl"), "shmguard", "check", "-f", str(EXAMPLES)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 1 and "PyTorchJob/resnet50" in r.stdout and "would inject 4481Mi" in r.stdout, r.stderr
    r = subprocess.run([tool("kubectl"), "shmguard", "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert "kubectl shmguard" in r.stdout


def test_pre_commit_hook_runs_as_pre_commit_would(tmp_path):
    hooks = yaml.safe_load((SRC / ".pre-commit-hooks.yaml").read_text())
    hook = [h for h in hooks if h["id"] == "shmguard-check"][0]
    assert hook["language"] == "system"
    for p in EXAMPLES.iterdir():
        shutil.copy(p, tmp_path)
    (tmp_path / "README.md").write_text("# not a manifest\n")
    (tmp_path / "values.yaml").write_text("replicas: 3\n")  # a values file: no pod templates
    files = sorted(str(p.name) for p in tmp_path.iterdir() if re.search(hook["files"], p.name))
    assert "README.md" not in files and "values.yaml" in files
    os.symlink(BIN, tmp_path / "shmguard")
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    cmd = hook["entry"].split() + hook.get("args", [])
    r = subprocess.run(cmd + files, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 1 and "pytorchjob-resnet.yaml:14" in r.stdout, r.stdout + r.stderr
    ok = [f for f in files if f in ("deployment-web.yaml", "pod-opt-out.yaml", "values.yaml")]
    r = subprocess.run(cmd + ok, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- rollout: audit mode and review ----

def test_audit_mode_answers_without_patching(certs, tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("mode: audit\n")
    s = Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt", config=cfg)
    try:
        status, body = s.post(review(training_pod()))
        resp = json.loads(body)["response"]
        assert status == 200 and resp["allowed"] is True and "patch" not in resp
        assert resp["warnings"] == ["shmguard would inject 8Gi at /dev/shm (audit mode)"]
        assert s.metric("shmguard_admissions_total", '{decision="audit",reason="injected"}') == 1
        assert any(l.get("decision") == "audit" and l.get("size") == "8Gi" for l in s.logs())
    finally:
        s.stop()


def test_review_against_a_running_webhook(certs, server):
    url = f"https://127.0.0.1:{server.port}"
    r = run("review", "--server", url, "--ca", str(certs / "ca.crt"), "--server-name", "shmguard.shmguard.svc",
            "-f", str(EXAMPLES))
    assert r.returncode == 0, r.stderr
    assert "pytorchjob-resnet.yaml:14 PyTorchJob/resnet50 spec.pytorchReplicaSpecs.Worker.template -> patched: /dev/shm 4481Mi" in r.stdout
    assert "pod-opt-out.yaml:2 Pod/inference (pod) -> allowed unchanged" in r.stdout
    assert "warning: /dev/shm is mounted with sizeLimit 1Gi but the annotations need 2752Mi" in r.stdout
    j = json.loads(run("review", "--server", url + "/mutate", "--ca", str(certs / "ca.crt"), "--server-name",
                       "shmguard.shmguard.svc", "-f", str(EXAMPLES / "pod-pytorch-image.yaml"), "-o", "json").stdout)
    assert j[0]["decision"] == "patched: /dev/shm 8Gi" and j[0]["patch"][0]["op"] == "add"
    # A Kubeflow template is sent as its operator creates the pods: with the job-name label.
    job = Path(server.ca).parent / "plain-job.yaml"
    job.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: plain\nspec:\n"
                   "  pytorchReplicaSpecs:\n    Worker:\n      template:\n        spec:\n          containers:\n"
                   "          - name: pytorch\n            image: ghcr.io/acme/trainer:1\n")
    r = run("review", "--server", url, "--ca", str(certs / "ca.crt"), "--server-name", "shmguard.shmguard.svc",
            "-f", str(job), "--expect-injected")
    assert r.returncode == 0 and "PyTorchJob/plain spec.pytorchReplicaSpecs.Worker.template -> patched: /dev/shm 8Gi" in r.stdout, r.stdout + r.stderr
    # The certificate is checked: the wrong name and the wrong CA both fail, naming the server.
    r = run("review", "--server", url, "--ca", str(certs / "ca.crt"), "-f", str(EXAMPLES))
    assert r.returncode == 2 and "not valid for 127.0.0.1" in r.stderr
    other = run_certs = subprocess.run([str(SRC / "hack/gen-certs.sh"), str(Path(server.ca).parent / "other"),
                                        "shmguard", "shmguard"], capture_output=True)
    assert other.returncode == 0
    r = run("review", "--server", url, "--ca", str(Path(server.ca).parent / "other" / "ca.crt"), "--server-name",
            "shmguard.shmguard.svc", "-f", str(EXAMPLES))
    assert r.returncode == 2 and url in r.stderr


# ---- small things a newcomer hit ----

def test_size_warnings_on_stderr_and_numeric_flag_types():
    r = run("size", "--batch-size", "32", "--num-workers", "4", "--sample-size", "1Mi", "--memory-limit", "512Mi")
    assert r.returncode == 0 and "warning" not in r.stdout and "exceeds the pod memory limit" in r.stderr
    h = run("size", "--help").stdout
    for flag, kind in [("batch-size", "UINT"), ("num-workers", "UINT"), ("prefetch-factor", "UINT"),
                       ("procs-per-pod", "UINT"), ("sample-size", "QUANTITY"), ("memory-limit", "QUANTITY")]:
        assert re.search(rf"--{flag} {kind}\b", h), (flag, h)


def test_metric_bucket_labels_are_short(server):
    server.post(review(training_pod()))
    m = server.metrics()
    assert 'le="0.00025"' in m and "0.00025000000000000001" not in m


def test_serve_on_a_port_in_use_exits_at_once(certs):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    t0 = time.time()
    r = run("serve", "--tls-cert-file", str(certs / "tls.crt"), "--tls-private-key-file", str(certs / "tls.key"),
            "--bind-address", "127.0.0.1", "--port", str(port), "--metrics-port", "-1")
    s.close()
    assert r.returncode == 1 and "address already in use" in r.stderr.lower()
    assert time.time() - t0 < 0.8 and "draining" not in r.stderr
    for line in r.stderr.splitlines():
        assert "\\u000a" not in line and "\\n\"" not in line
