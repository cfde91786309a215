"""The command line: size, version, mutate and check over files, directories, stdin and JSON."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pylib.cli import run
from pylib.paths import BIN, SRC

CORPUS = SRC.parent / "shared" / "corpus"
EXAMPLES = SRC / "examples"


def test_version():
    r = run("version")
    assert r.returncode == 0 and r.stdout.startswith("shmguard ")


def test_size_text_matches_formula():
    r = run("size", "--batch-size", "32", "--num-workers", "4", "--sample-size", "1Mi", "--prefetch-factor", "4")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "1120Mi"
    assert "576Mi" in lines[1] and "1120Mi" in lines[1]


@pytest.mark.parametrize("batch,workers,sample,prefetch,procs", [
    (64, 8, 256 * 1024, 2, 1), (32, 4, 1 << 20, 4, 1), (128, 2, 64 * 1024, 3, 1), (32, 8, 588 * 1024, 2, 8),
    (7, 3, 123457, 5, 3), (256, 16, 3 << 20, 2, 4), (1, 0, 1, 1, 1)])
def test_size_json_matches_formula_to_the_mib(batch, workers, sample, prefetch, procs):
    r = run("size", "--batch-size", str(batch), "--num-workers", str(workers), "--sample-size", str(sample),
            "--prefetch-factor", str(prefetch), "--procs-per-pod", str(procs), "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    mi, gi = 1 << 20, 1 << 30
    need = procs * (workers * prefetch + 2) * batch * sample * 1.5 + (procs * 64 * mi if procs > 1 else 0) + 256 * mi
    expect = min(max(-(-int(need) // mi) * mi, gi), 64 * gi)
    assert out["bytes"] == expect
    assert bool(out["warnings"]) == (need > 64 * gi)  # warned only when clamped to max
    unit = "Gi" if expect % gi == 0 else "Mi"
    assert out["sizeLimit"] == f"{expect // (gi if unit == 'Gi' else mi)}{unit}"


def test_size_memory_limit_warning():
    r = run("size", "--batch-size", "32", "--num-workers", "4", "--sample-size", "1Mi", "--prefetch-factor", "4",
            "--memory-limit", "1Gi", "-o", "json")
    out = json.loads(r.stdout)
    assert out["sizeLimit"] == "1120Mi" and out["warnings"] and "memory limit" in out["warnings"][0]


@pytest.mark.parametrize("args", [
    ["--batch-size", "x", "--num-workers", "1", "--sample-size", "1"],
    ["--batch-size", "0", "--num-workers", "1", "--sample-size", "1"],
    ["--batch-size", "1", "--num-workers", "-1", "--sample-size", "1"],
    ["--batch-size", "1", "--num-workers", "1", "--sample-size", "1GB"],
    ["--batch-size", "1", "--num-workers", "1"],
    ["--batch-size", "1", "--num-workers", "1", "--sample-size", "1", "-o", "xml"],
])
def test_size_bad_arguments(args):
    r = run("size", *args)
    assert r.returncode != 0 and r.stderr.strip() and not r.stdout.strip()


JOB = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: resnet
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 4
      template:
        metadata:
          annotations:
            shmguard.io/batch-size: "64"
            shmguard.io/num-workers: "8"
            shmguard.io/sample-size: 588Ki
        spec:
          containers:
          - name: pytorch
            image: ghcr.io/acme/resnet:1
            resources:
              limits:
                nvidia.com/gpu: 4
"""
OK = """apiVersion: v1
kind: ConfigMap
metadata:
  name: settings   # untouched
data:
  a: "1"
"""


def test_mutate_stdin_and_report():
    r = run("mutate", "-f", "-", stdin=OK + "---\n" + JOB)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(OK + "---\n")  # unchanged document byte-for-byte
    docs = list(yaml.safe_load_all(r.stdout))
    vol = docs[1]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"][0]
    assert vol["emptyDir"] == {"medium": "Memory", "sizeLimit": "4481Mi"}
    # The line is the template mapping's first line (after the 6-line ConfigMap and "---").
    assert "<stdin>:17 PyTorchJob/resnet spec.pytorchReplicaSpecs.Worker.template -> injected 4481Mi" in r.stderr


def test_mutate_json_output_and_json_input(tmp_path):
    r = run("mutate", "-f", "-", "-o", "json", stdin=JOB)
    out = json.loads(r.stdout)
    assert out["kind"] == "PyTorchJob"
    (tmp_path / "job.json").write_text(r.stdout)
    r2 = run("check", "-f", str(tmp_path / "job.json"))
    assert r2.returncode == 0, r2.stdout  # already injected: nothing missing
    r3 = run("mutate", "-f", "-", "-o", "json", stdin=OK + "---\n" + JOB)
    lst = json.loads(r3.stdout)
    assert lst["kind"] == "List" and len(lst["items"]) == 2 and lst["items"][0]["data"] == {"a": "1"}


def test_check_exit_codes(tmp_path):
    (tmp_path / "ok.yaml").write_text(OK)
    (tmp_path / "job.yml").write_text(JOB)
    (tmp_path / "notes.txt").write_text("not yaml: [")
    r = run("check", "-f", str(tmp_path / "ok.yaml"))
    assert r.returncode == 0
    r = run("check", "-f", str(tmp_path))
    assert r.returncode == 1
    assert "job.yml:10 PyTorchJob/resnet spec.pytorchReplicaSpecs.Worker.template -> would inject 4481Mi" in r.stdout
    r = run("check", "-f", str(tmp_path), "-o", "json")
    report = json.loads(r.stdout)
    job = [i for i in report["items"] if i["file"].endswith("job.yml")][0]
    assert r.returncode == 1 and job["size"] == "4481Mi" and job["failed"] is True
    assert job["findings"] == [{"rule": "missing", "line": 10, "message": "would inject 4481Mi", "fails": True}]
    assert report["totals"]["templates"] == 1 and report["totals"]["failed"] == 1  # the ConfigMap has no template
    # A template whose own /dev/shm is too small.
    small = JOB.replace("            resources:", "            volumeMounts:\n            - name: dshm\n"
                        "              mountPath: /dev/shm\n            resources:") + \
        "          volumes:\n          - name: dshm\n            emptyDir:\n              medium: Memory\n" \
        "              sizeLimit: 1Gi\n"
    r = run("check", "-f", "-", stdin=small)
    assert r.returncode == 1 and "too small: has 1Gi, needs 4481Mi" in r.stdout


@pytest.mark.parametrize("text,where", [
    ("a: 1\n---\nb: [1,\nc: 2\n", "<stdin>:"),
    ("- just\n- a list\n", "<stdin>:8"),
    ("\x00\x01\x02binary", "<stdin>"),
])
def test_invalid_input_is_exit_2_with_nothing_on_stdout(text, where):
    for cmd in ("mutate", "check"):
        r = run(cmd, "-f", "-", stdin=OK + "---\n" + text)
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert r.stdout == ""
        assert where in r.stderr


def test_missing_file():
    r = run("check", "-f", "/nonexistent/k8s")
    assert r.returncode == 2 and "/nonexistent/k8s" in r.stderr
    r = run("mutate", "-f", "/nonexistent/x.yaml")
    assert r.returncode == 2 and r.stdout == ""


@pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
def test_corpus_directory_check():
    r = run("check", "-f", str(CORPUS))
    assert r.returncode == 1
    assert "PaddleJob/paddle-simple-gpu spec.paddleReplicaSpecs.Worker.template -> skipped: not PyTorch (PaddleJob)" in r.stdout


@pytest.mark.skipif(not EXAMPLES.exists(), reason="no bundled examples")
def test_bundled_examples_mutate():
    r = run("mutate", "-f", str(EXAMPLES))
    assert r.returncode == 0, r.stderr


def test_cmake_install_puts_both_names_on_path(tmp_path):
    """README "Install the CLI": `cmake --install build --prefix DIR` gives DIR/bin/shmguard and the
    kubectl-shmguard link, and both run."""
    build = Path(BIN).resolve().parent
    if not (build / "cmake_install.cmake").exists() or not shutil.which("cmake"):
        pytest.skip("not a CMake build directory")
    r = subprocess.run(["cmake", "--install", str(build), "--prefix", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    shm, plugin = tmp_path / "bin" / "shmguard", tmp_path / "bin" / "kubectl-shmguard"
    assert shm.is_file() and os.access(shm, os.X_OK)
    assert plugin.is_symlink() and os.readlink(plugin) == "shmguard"
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    for name in ("shmguard", "kubectl-shmguard"):
        r = subprocess.run([name, "version"], capture_output=True, text=True, env=env)
        assert r.returncode == 0 and r.stdout.startswith("shmguard "), (name, r.stdout, r.stderr)
    r = subprocess.run(["kubectl-shmguard", "--help"], capture_output=True, text=True, env=env)
    assert "kubectl shmguard" in r.stdout


def test_annotation_table_readme_and_help_agree():
    """One table of annotations (webhook/inject/annotations.cpp): `shmguard --help` prints it, and
    the "Annotations" table of docs/sizing.md must say the same, row for row."""
    from pylib.readme_blocks import section
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True)
    lines = r.stdout.split("Pod annotations (on a workload's pod template):\n", 1)[1].splitlines()
    from_help = {}
    for line in lines:
        key, _, help_text = line.strip().partition(" ")
        if key.startswith("shmguard.io/"):
            from_help[key] = help_text.strip()
    from_readme = {}
    for row in section("Annotations", doc="docs/sizing.md").splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`shmguard.io/"):
            from_readme[cells[0].strip("`")] = cells[1]
    assert from_help and from_readme == from_help


def test_review_names_the_missing_endpoints_when_nothing_answers(tmp_path):
    """What `helm test` prints when the webhook's Service has no ready pod: where to look, and what
    failurePolicy Ignore does meanwhile."""
    ca = tmp_path / "ca.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(tmp_path / "ca.key"), "-out", str(ca), "-days", "1", "-subj", "/CN=t"],
                   check=True, capture_output=True)
    r = subprocess.run([BIN, "review", "--server", "https://127.0.0.1:1/mutate", "--ca", str(ca),
                        "--server-name", "shmguard.team-a.svc", "--test-pod", "--timeout", "2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "nothing answers there" in r.stderr and "failurePolicy Ignore admits every pod" in r.stderr, r.stderr
    assert "`kubectl -n team-a get endpoints shmguard`" in r.stderr, r.stderr  # named for the Service
    r = subprocess.run([BIN, "review", "--server", "https://shmguard.team-a.svc:1/mutate", "--ca", str(ca),
                        "--test-pod", "--timeout", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "`kubectl -n team-a get endpoints shmguard`" in r.stderr, r.stderr


def test_readme_sizing_figures_are_what_shmguard_writes(tmp_path):
    """The docs' worked sizing figures, run: the line docs/troubleshooting.md reads is the sizing text
    shmguard writes for README's first job, README's `check` output for it is what check prints, and
    every `shmguard size` command of README.md and docs/*.md prints the size shown with it (a
    once-wrong line said 2717Mi for 8 workers; shmguard says 4481Mi)."""
    import re
    readme = (SRC / "README.md").read_text()
    i = readme.index("Annotate a PyTorchJob")
    job = re.search(r"```yaml\n(.*?)```", readme[i:], re.S).group(1)
    out = json.loads(subprocess.run([BIN, "mutate", "-f", "-", "-o", "json"], input=job, capture_output=True,
                                    text=True, check=True).stdout)
    sizing = out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"]["shmguard.io/sizing"]
    trouble = (SRC / "docs" / "troubleshooting.md").read_text()
    trouble = trouble[trouble.index("- **How to read `shmguard.io/sizing`**"):]
    assert re.search(r"`(batch [^`]*)`", trouble).group(1) == sizing
    (tmp_path / "job.yaml").write_text(job)
    shown = re.search(r"\$ shmguard check -f job\.yaml\n(.*?)```", readme, re.S).group(1)
    r = subprocess.run([BIN, "check", "-f", "job.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == shown, r.stdout
    # Every `shmguard size ...` command the docs show, with the size they say it prints.
    docs = "\n".join(p.read_text() for p in [SRC / "README.md", *sorted((SRC / "docs").glob("*.md"))])
    sizes = re.findall(r"shmguard size ((?:--[a-z-]+ [^\s`]+ ?)+)[^\n]*\n(?:[^\n]*?)(\d+(?:Mi|Gi))", docs)
    assert sizes, "the docs show no shmguard size command"
    for args, size in sizes:
        r = subprocess.run([BIN, "size", *args.split()], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.splitlines()[0] == size, (args, size, r.stdout, r.stderr)


def test_check_needs_files_one_way_or_the_other():
    """`-f FILE` and a positional FILE are one option: --help does not mark both REQUIRED, and a
    check without either says what to give."""
    r = subprocess.run([BIN, "check", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "REQUIRED" not in r.stdout, r.stdout
    assert "-j,--jobs UINT=0            threads working on documents (0: one per core); output is the same for any" \
        in r.stdout, r.stdout
    r = subprocess.run([BIN, "check"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == "shmguard: check: give the manifests to check: -f FILE|DIR|- (or FILE ...)\n"


def test_procs_has_one_shape_in_size_and_check_and_the_default_names_it(tmp_path):
    size = json.loads(run("size", "--batch-size", "8", "--num-workers", "2", "--sample-size", "1Mi",
                          "--procs-per-pod", "3", "-o", "json").stdout)
    assert size["procs"] == {"count": 3, "source": "--procs-per-pod"}
    assert json.loads(run("size", "--batch-size", "8", "--num-workers", "2", "--sample-size", "1Mi",
                          "-o", "json").stdout)["procs"] == {"count": 1, "source": "default"}
    # No sizing annotations: the default size, and still the process count and where it came from.
    f = tmp_path / "job.yaml"
    f.write_text("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec:\n  template:\n    spec:\n"
                 "      containers:\n      - name: t\n        image: ghcr.io/acme/train:1\n"
                 "        command: [torchrun, --nproc_per_node=4, train.py]\n")
    item = json.loads(run("check", "-o", "json", "-f", str(f)).stdout)["items"][0]
    assert item["procs"] == {"count": 4, "source": "torchrun --nproc_per_node"}
    assert set(item["procs"]) == set(size["procs"])
    assert item["sizing"] == ("no batch-size/num-workers/sample-size annotations; default 8Gi; "
                              "procs 4 from torchrun --nproc_per_node (recognised by: torchrun in command)")
    assert f"{f}:7 Job/j spec.template -> would inject 8Gi (4 procs from torchrun --nproc_per_node)" in \
        run("check", "-f", str(f)).stdout
