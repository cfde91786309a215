"""The loop closed (`check --observed`, `mutate --observed`): what the cluster saw of each owner's
/dev/shm, as `shmguard top -o json` and the monitor's /metrics write it, against real manifests
from the corpus copied to a temporary tree. check fails an outgrown or wasteful template and says
so at its line; mutate -i writes the size into the files (git diff: the lines it changed); the
same check then passes; an owner in two files is edited in both; an owner with no document is
named and fails nothing."""
import json
import shutil
from pathlib import Path

import pytest

from pylib.cli import git, run
from pylib.paths import SRC

CORPUS = SRC / "tests" / "corpus"
MI, GI = 1 << 20, 1 << 30
# Real manifests: a PyTorchJob with nprocPerNode 2 (webhook-sized, 8Gi per pod), a vLLM
# Deployment with its own 16Gi /dev/shm, a Job with its own 1Gi one, and a TrainJob with its runtime.
DDP = CORPUS / "kubeflow__training-operator" / "examples__pytorch__cpu-demo__demo.yaml"
VLLM = CORPUS / "vllm-project__vllm" / "examples__online_serving__prometheus_grafana__k8s-monitoring__vllm-deployment.yaml"
BERT = SRC / "examples" / "job-small-shm.yaml"
TRAINJOB = CORPUS / "kubeflow__trainer" / "examples__yaml-examples__torch__mnist_training.yaml"


def top_item(ns, pod, kind, owner, peak, size, limit=True):
    """One pod as `shmguard top -o json` writes it (webhook/cli/top_command.cpp)."""
    return {"namespace": ns, "pod": pod, "node": "gpu-1", "owner": {"kind": kind, "name": owner}, "volume": "shmguard-dshm",
            "sizeLimitBytes": size if limit else None, "mountedBytes": size, "usedBytes": peak // 2, "peakBytes": peak,
            "usedPercent": 50, "peakPercent": 90}


@pytest.fixture
def tree(tmp_path):
    """A git repository holding the manifests: the PyTorchJob in two places (a base and an overlay copy)."""
    t = tmp_path / "repo"
    for dst, src in [("base/ddp.yaml", DDP), ("prod/ddp.yaml", DDP), ("serve/vllm.yaml", VLLM),
                     ("jobs/bert.yaml", BERT), ("jobs/mnist.yaml", TRAINJOB)]:
        (t / dst).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, t / dst)
    git(t.parent, "init", "-q", str(t))
    git(t, "add", ".")
    git(t, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "manifests")
    return t


@pytest.fixture
def top_json(tmp_path):
    items = [
        # The PyTorchJob's pods (8Gi each from the webhook): the Master near full, the Worker too.
        top_item("team-a", "torchrun-cpu-master-0", "PyTorchJob", "torchrun-cpu", 7800 * MI, 8 * GI),
        top_item("team-a", "torchrun-cpu-worker-0", "PyTorchJob", "torchrun-cpu", 7500 * MI, 8 * GI),
        # The vLLM Deployment's pod: 286Mi used of its own 16Gi.
        top_item("vllm", "vllm-qwen3-235b-6d5f7c9b8-x2x7q", "ReplicaSet", "vllm-qwen3-235b-6d5f7c9b8", 286 * MI, 16 * GI),
        # The TrainJob's pod (its JobSet's): 3900Mi of the 4Gi shmguard gave it.
        top_item("default", "mnist-demo-node-0-0-abcde", "JobSet", "mnist-demo", 3900 * MI, 4 * GI),
        # An owner whose manifest is not in the repository.
        top_item("team-b", "gone-node-0-0-k2x9p", "JobSet", "gone", 100 * MI, 1 * GI),
        # A pod with no stats yet: no figures, ignored.
        dict(top_item("team-a", "torchrun-cpu-worker-1", "PyTorchJob", "torchrun-cpu", 0, 8 * GI),
             mountedBytes=None, usedBytes=None, peakBytes=None),
    ]
    p = tmp_path / "top.json"
    p.write_text(json.dumps({"items": items}, indent=2))
    return p


def check(tree, *extra):
    return run("check", "-f", str(tree), "-o", "json", "--fail-on", "outgrown,wasteful", *extra)


def by_template(report):
    return {(Path(i["file"]).relative_to(i["file"].split("/repo/")[0] + "/repo").as_posix(), i["template"]): i
            for i in report["items"]}


def test_check_fails_outgrown_and_wasteful_templates_at_their_lines(tree, top_json):
    r = run("check", "-f", str(tree), "--observed", str(top_json), "--fail-on", "outgrown,wasteful")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    for f in ("base/ddp.yaml", "prod/ddp.yaml"):
        # Each replica's template meets its own pod (NAME-master-0, NAME-worker-0).
        assert f"{tree}/{f}:12: outgrown: 1 pod of PyTorchJob team-a/torchrun-cpu peaked at 7800Mi, 95% of its 8Gi; shmguard.io/size: 11700Mi\n" in out, out
        assert f"{tree}/{f}:23: outgrown: 1 pod of PyTorchJob team-a/torchrun-cpu peaked at 7500Mi, 91% of its 8Gi; shmguard.io/size: 11250Mi\n" in out, out
    assert (f"{tree}/serve/vllm.yaml:41: wasteful: 1 pod of ReplicaSet vllm/vllm-qwen3-235b-6d5f7c9b8 peaked at 286Mi, "
            "1% of its 16Gi (more than 8x what it used); shmguard.io/size: 1Gi\n") in out, out
    assert (f"{tree}/jobs/mnist.yaml:850: outgrown: 1 pod of JobSet default/mnist-demo peaked at 3900Mi, 95% of its 4Gi; "
            "shmguard.io/size: 5850Mi\n") in out, out
    assert "8 pod templates: 6 would get /dev/shm, 1 too small, 0 stale, 1 warning, 5 outgrown, 1 wasteful; 6 fail (--fail-on outgrown,wasteful)" in out, out
    assert "observed: JobSet team-b/gone (1 pod): no document in the input" in out, out
    # One FILE per --observed: the manifests may follow it, as a user types them.
    after = run("check", "--observed", str(top_json), "--fail-on", "outgrown,wasteful", str(tree / "serve"))
    assert after.returncode == 1 and "serve/vllm.yaml:41: wasteful:" in after.stdout, after.stdout + after.stderr
    # The Job no pod was seen of is judged as ever and not on figures.
    assert f"{tree}/jobs/bert.yaml:9 Job/bert-finetune spec.template -> too small: has 1Gi, needs 2752Mi" in out
    assert "bert.yaml:9: outgrown" not in out and "bert.yaml:9: wasteful" not in out


def test_check_json_carries_the_figures_and_totals(tree, top_json):
    r = check(tree, "--observed", str(top_json))
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    items = by_template(rep)
    master = items[("base/ddp.yaml", "spec.pytorchReplicaSpecs.Master.template")]["observed"]
    assert master["peakBytes"] == 7800 * MI and master["sizeBytes"] == 8 * GI and master["pods"] == 1
    assert master["fit"] == "outgrown" and master["suggested"] == "11700Mi", master
    vllm = items[("serve/vllm.yaml", "spec.template")]["observed"]
    assert vllm["fit"] == "wasteful" and vllm["suggested"] == "1Gi" and vllm["sizeBytes"] == 16 * GI, vllm
    assert "observed" not in items[("jobs/bert.yaml", "spec.template")] or \
        items[("jobs/bert.yaml", "spec.template")]["observed"] is None
    totals = rep["totals"]
    assert totals["observedWithoutDocument"] == ["JobSet team-b/gone (1 pod)"], totals
    # Without --observed the JSON has neither the figures nor the observed rules.
    plain = json.loads(run("check", "-f", str(tree), "-o", "json", "--fail-on", "none").stdout)
    assert all("observed" not in i for i in plain["items"])
    assert "observedWithoutDocument" not in plain["totals"]


def test_mutate_writes_the_sizes_and_check_passes_after(tree, top_json):
    r = run("mutate", "-i", "-f", str(tree), "--observed", str(top_json))
    assert r.returncode == 0, r.stderr
    assert "observed: JobSet team-b/gone (1 pod): no document in the input" in r.stderr
    diff = git(tree, "diff", "-U0", "--no-color")
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    changed = sorted(git(tree, "diff", "--name-only").split())
    assert changed == ["base/ddp.yaml", "jobs/mnist.yaml", "prod/ddp.yaml", "serve/vllm.yaml"], diff
    # The user's own sizeLimit: one line replaced.
    assert "-            sizeLimit: 16Gi" in removed and "+            sizeLimit: 1Gi" in added, diff
    # The TrainJob: its spec.annotations.
    assert any("shmguard.io/size: 5850Mi" in a for a in added), diff
    # Each PyTorchJob file gets the size on both templates.
    for f in ("base/ddp.yaml", "prod/ddp.yaml"):
        d = git(tree, "diff", "-U0", "--no-color", f)
        assert d.count("shmguard.io/size: 11700Mi") == 1 and d.count("shmguard.io/size: 11250Mi") == 1, d
    # Nothing else was touched: every removed line is the one sizeLimit.
    assert removed == ["-            sizeLimit: 16Gi"], diff
    # The report: one line per template, what was written and why the rest was not.
    assert "sizeLimit 1Gi from the observed peak" in r.stderr or "size 1Gi from the observed peak" in r.stderr, r.stderr
    # The same check now passes: the new sizes are what the figures asked for.
    after = run("check", "-f", str(tree), "--observed", str(top_json), "--fail-on", "outgrown,wasteful")
    assert after.returncode == 0, after.stdout
    # And a second mutate changes nothing.
    again = run("mutate", "-i", "-f", str(tree), "--observed", str(top_json))
    assert again.returncode == 0, again.stderr
    assert git(tree, "diff", "-U0", "--no-color") == diff


def test_metrics_text_is_an_input_too(tree, tmp_path):
    metrics = tmp_path / "metrics.txt"
    labels = 'namespace="vllm",pod="vllm-qwen3-235b-6d5f7c9b8-x2x7q",owner_kind="ReplicaSet",owner_name="vllm-qwen3-235b-6d5f7c9b8"'
    metrics.write_text("# HELP shmguard_shm_peak_bytes The most /dev/shm the pod used.\n"
                       "# TYPE shmguard_shm_peak_bytes gauge\n"
                       f"shmguard_shm_peak_bytes{{{labels}}} {15 * GI}\n"
                       f"shmguard_shm_size_bytes{{{labels}}} {16 * GI}\n")
    r = run("check", "-f", str(tree / "serve"), "--observed", str(metrics), "--fail-on", "outgrown")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "outgrown: 1 pod of ReplicaSet vllm/vllm-qwen3-235b-6d5f7c9b8 peaked at 15Gi, 93% of its 16Gi" in r.stdout, r.stdout


def test_bad_figures_name_the_file_and_line_and_write_nothing(tree, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"items": [\n  {"pod": "x",\n   "mountedBytes": }\n]}\n')
    for cmd in (["check", "-f", str(tree)], ["mutate", "-i", "-f", str(tree)]):
        r = run(*cmd, "--observed", str(bad))
        assert r.returncode == 2 and r.stdout == "", r.stdout
        assert f"--observed: {bad}:3: not JSON (" in r.stderr, r.stderr
    assert git(tree, "status", "--porcelain") == ""
    missing = run("check", "-f", str(tree), "--observed", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "nope.json" in missing.stderr
