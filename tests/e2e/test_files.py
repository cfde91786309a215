"""No file harmed: `mutate -i` through symlinks, owners and hard links; directory walks that never
skip silently (permission cases run as the unprivileged user `nobody`); templates sharing a YAML
anchor; nesting far past the limit; annotation values that are not strings; YAML directives.
Every case runs the binary on real files and checks the bytes, inodes and owners it leaves."""
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from pylib.cli import run
from pylib.paths import BIN, SRC

EXAMPLE = SRC / "examples" / "pytorchjob-resnet.yaml"
ROOT = os.geteuid() == 0


needs_root = pytest.mark.skipif(not ROOT or not shutil.which("setpriv"),
                                reason="needs root (chown) and setpriv to act as nobody")


@pytest.fixture
def tree():
    # Readable and traversable by nobody (pytest's own tmp_path sits under a root-only folder).
    d = Path(tempfile.mkdtemp(prefix="shmguard-files-"))
    os.chmod(d, 0o755)
    yield d
    for p in d.rglob("*"):
        if p.is_dir() and not p.is_symlink():
            os.chmod(p, 0o755)
    shutil.rmtree(d)


@needs_root
def test_in_place_follows_symlinks_and_keeps_owner_mode_and_hard_links(tree):
    (tree / "target").mkdir()
    (tree / "links").mkdir()
    target = tree / "target" / "demo.yaml"
    shutil.copy(EXAMPLE, target)
    os.chmod(target, 0o640)
    nobody = pwd.getpwnam("nobody")
    os.chown(target, nobody.pw_uid, nobody.pw_gid)
    os.link(target, tree / "target" / "hard.yaml")
    link = tree / "links" / "demo.yaml"
    link.symlink_to("../target/demo.yaml")
    before = os.stat(target)

    r = run("mutate", "-i", "-f", str(link))
    assert r.returncode == 0, r.stderr
    assert "rewritten (the symlink's target" in r.stderr
    assert link.is_symlink() and os.readlink(link) == "../target/demo.yaml"
    after = os.stat(target)
    assert (after.st_uid, after.st_gid, after.st_mode, after.st_ino, after.st_nlink) == \
        (before.st_uid, before.st_gid, before.st_mode, before.st_ino, 2)
    text = target.read_text()
    assert "shmguard-dshm" in text and (tree / "target" / "hard.yaml").read_text() == text
    # Only lines were added.
    assert set(EXAMPLE.read_text().splitlines()) <= set(text.splitlines())


@needs_root
def test_a_single_linked_file_keeps_its_owner_through_the_atomic_rename(tree):
    f = tree / "job.yaml"
    shutil.copy(EXAMPLE, f)
    nobody = pwd.getpwnam("nobody")
    os.chown(f, nobody.pw_uid, nobody.pw_gid)
    ino = os.stat(f).st_ino
    assert run("mutate", "-i", "-f", str(f)).returncode == 0
    st = os.stat(f)
    assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
    assert st.st_ino != ino, "a file with one link is replaced atomically (a new inode)"
    assert not list(tree.glob("*.shmguard-*")), "no temporary file left behind"


@needs_root
def test_a_file_whose_owner_cannot_be_kept_is_an_error_before_anything_is_written(tree):
    os.chmod(tree, 0o777)
    a, b = tree / "a.yaml", tree / "b.yaml"
    shutil.copy(EXAMPLE, a)
    shutil.copy(SRC / "examples" / "pod-pytorch-image.yaml", b)
    os.chmod(a, 0o666)  # root's, but nobody may write it: written in place, owner kept
    os.chmod(b, 0o644)  # root's, read-only to nobody: cannot be rewritten keeping its owner
    a_before, b_before = a.read_bytes(), b.read_bytes()
    r = run("mutate", "-i", "-f", str(tree), user="nobody")
    assert r.returncode == 2
    assert f"{b}: cannot rewrite keeping its owner 0:0 (Permission denied); nothing was written" in r.stderr
    assert a.read_bytes() == a_before and b.read_bytes() == b_before
    os.chmod(b, 0o666)
    r = run("mutate", "-i", "-f", str(tree), user="nobody")
    assert r.returncode == 0, r.stderr
    for f in (a, b):
        st = os.stat(f)
        assert (st.st_uid, st.st_gid) == (0, 0) and "shmguard-dshm" in f.read_text()


@needs_root
def test_unreadable_entries_are_errors_that_say_why(tree):
    (tree / "ok").mkdir()
    shutil.copy(SRC / "examples" / "deployment-web.yaml", tree / "ok")
    secret = tree / "secret"
    secret.mkdir()
    shutil.copy(EXAMPLE, secret)
    os.chmod(secret, 0)
    try:
        for target in (tree, secret):
            r = run("check", "-f", str(target), user="nobody")
            assert r.returncode == 2, r.stdout
            assert f"{secret}: cannot read directory: Permission denied" in r.stderr
            assert r.stdout == ""
    finally:
        os.chmod(secret, 0o755)
    f = secret / EXAMPLE.name
    os.chmod(f, 0o600)
    r = run("check", "-f", str(f), user="nobody")
    assert r.returncode == 2 and f"{f}: cannot open: Permission denied" in r.stderr


def test_symlinked_directories_are_followed_once_and_dangling_links_reported(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    shutil.copy(EXAMPLE, real / "job.yaml")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "jobs").symlink_to(real)
    (real / "loop").symlink_to("..")  # a cycle back up
    r = run("check", "-f", str(tmp_path / "repo"), "-o", "json", "--fail-on", "none")
    assert r.returncode == 0, r.stderr
    files = {i["file"] for i in yaml.safe_load(r.stdout)["items"]}
    assert files == {str(tmp_path / "repo" / "jobs" / "job.yaml")}
    (tmp_path / "repo" / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    r = run("check", "-f", str(tmp_path / "repo"))
    assert r.returncode == 2
    assert f"{tmp_path / 'repo' / 'gone.yaml'}: cannot follow symlink: No such file or directory" in r.stderr
    r = run("check", "-f", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "missing.yaml: No such file or directory" in r.stderr


VOLCANO = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: pytorch-anchored
spec:
  minAvailable: 2
  tasks:
    - replicas: 1
      name: master
      template:
        metadata:
          annotations:
            shmguard.io/batch-size: "32"
            shmguard.io/num-workers: "4"
            shmguard.io/sample-size: {master}
        spec: &task-spec
          containers:
            - name: pytorch   # keep this name
              image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
              command: [python3, train.py]
          restartPolicy: OnFailure
    - replicas: 3
      name: worker
      template:
        metadata:
          annotations:
            shmguard.io/batch-size: "32"
            shmguard.io/num-workers: "4"
            shmguard.io/sample-size: {worker}
        spec: *task-spec
"""


def test_templates_sharing_an_anchor_get_one_surgical_edit(tmp_path):
    f = tmp_path / "volcano.yaml"
    src = VOLCANO.format(master="1Mi", worker="1Mi")
    f.write_text(src)
    r = run("mutate", "-i", "-f", str(f))
    assert r.returncode == 0, r.stderr
    assert "re-emitted" not in r.stderr
    out = f.read_text()
    # Every line of the input is still there, in order: comments, flow lists, the anchor and alias.
    lines = out.splitlines()
    it = iter(lines)
    assert all(any(l == o for o in it) for l in src.splitlines()), out
    assert "# keep this name" in out and "command: [python3, train.py]" in out
    assert "spec: &task-spec" in out and "spec: *task-spec" in out
    assert out.count("- name: shmguard-dshm") == 2  # one volume, one mount, at the anchored node
    job = yaml.safe_load(out)
    for task in job["spec"]["tasks"]:
        spec = task["template"]["spec"]
        assert spec["volumes"][0]["emptyDir"]["sizeLimit"] == "1Gi"
        assert spec["containers"][0]["volumeMounts"][0]["mountPath"] == "/dev/shm"


def test_templates_sharing_an_anchor_that_need_different_edits_stop(tmp_path):
    f = tmp_path / "volcano.yaml"
    src = VOLCANO.format(master="1Mi", worker="4Mi")
    f.write_text(src)
    r = run("mutate", "-i", "-f", str(f))
    assert r.returncode == 2
    assert f"{f}:16: templates sharing the anchor here need different edits" in r.stderr
    assert "--allow-reformat" in r.stderr
    assert f.read_text() == src, "nothing written"
    r = run("mutate", "-f", str(f))
    assert r.returncode == 2 and r.stdout == ""
    r = run("mutate", "--allow-reformat", "-f", str(f))
    assert r.returncode == 0 and "document re-emitted" in r.stderr
    sizes = [t["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"]
             for t in yaml.safe_load(r.stdout)["spec"]["tasks"]]
    assert sizes == ["1Gi", "2176Mi"]


@pytest.mark.parametrize("name,text", [
    ("deep.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\na: " + "[" * 100000 + "]" * 100000 + "\n"),
    ("deep.json", '{"apiVersion": "v1",\n"a": ' + "[" * 60000 + "]" * 60000 + "}\n"),
    ("maps.yaml", "apiVersion: v1\nkind: Pod\nx:\n" + "".join(" " * i + "k:\n" for i in range(1, 400)) + " " * 400 + "v\n"),
], ids=["yaml-lists", "json-lists", "yaml-maps"])
def test_nesting_past_the_limit_is_a_clear_error_at_once(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    t0 = time.monotonic()
    r = run("check", "-f", str(f))
    elapsed = time.monotonic() - t0
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    line = 2 if name.endswith(".json") else (4 if name == "deep.yaml" else 131)
    assert f"{f}:{line}: nesting deeper than 128" in r.stderr, r.stderr[-300:]
    print(f"\n{name} ({len(text)} bytes): refused in {elapsed:.3f}s")


def test_recursive_alias_is_refused(tmp_path):
    f = tmp_path / "cycle.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: &x {containers: [*x]}\n")
    r = run("check", "-f", str(f))
    assert r.returncode == 2 and f"{f}:4: an alias inside the node it refers to" in r.stderr


def test_annotation_values_must_be_strings(tmp_path):
    f = tmp_path / "pod.yaml"
    src = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    shmguard.io/batch-size: 64\n"
           "    shmguard.io/num-workers: \"4\"\n    shmguard.io/sample-size: 1Mi\n    team/flag: true\n"
           "spec:\n  containers:\n  - name: c\n    image: pytorch/pytorch\n")
    f.write_text(src)
    r = run("check", "-f", str(f), "--fail-on", "rejected")
    assert r.returncode == 1
    assert (f"{f}:6: error: annotation shmguard.io/batch-size: 64 is a number; kubectl would reject it "
            "(annotation values must be strings): quote it") in r.stdout
    assert f"{f}:9: warning: annotation team/flag: true is a bool" in r.stdout
    # The refused value is not sized by: the pod a cluster accepts cannot carry it.
    assert f"{f}:1 Pod/p (pod) -> would inject 8Gi" in r.stdout, r.stdout
    item = json.loads(run("check", "-f", str(f), "-o", "json").stdout)["items"][0]
    assert item["sizing"] == "no batch-size annotation; default 8Gi; procs 1 (default) (recognised by: annotation shmguard.io/num-workers)", item
    assert run("check", "-f", str(f), "--fail-on", "none").returncode == 0
    r = run("mutate", "-i", "-f", str(f))
    assert r.returncode == 2 and f"{f}:6: annotation shmguard.io/batch-size: 64 is a number" in r.stderr
    assert f.read_text() == src
    f.write_text(src.replace("batch-size: 64", 'batch-size: "64"'))
    r = run("check", "-f", str(f), "--fail-on", "rejected")
    assert r.returncode == 0, r.stdout
    assert f"{f}:1 Pod/p (pod) -> would inject 1216Mi" in r.stdout, r.stdout  # quoted, it sizes


def test_yaml_directives_are_kept_byte_for_byte(tmp_path):
    f = tmp_path / "directives.yaml"
    src = ("%YAML 1.1\n%TAG !e! tag:example.com,2000:\n---\n" + EXAMPLE.read_text() +
           "...\n%YAML 1.1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    f.write_text(src)
    plain = tmp_path / "cm.yaml"
    plain.write_text("%YAML 1.1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    r = run("mutate", "-f", str(plain))
    assert r.returncode == 0 and r.stdout == plain.read_text()
    r = run("mutate", "-f", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("%YAML 1.1\n%TAG !e! tag:example.com,2000:\n---\n")
    assert "...\n%YAML 1.1\n---\napiVersion: v1\nkind: ConfigMap" in r.stdout
    assert [d["kind"] for d in yaml.safe_load_all(r.stdout)] == ["PyTorchJob", "ConfigMap"]
    # Between files, a directive follows "..." so it stays a directive.
    r = run("mutate", "-f", str(SRC / "examples" / "deployment-web.yaml"), "-f", str(plain))
    assert r.returncode == 0
    assert [d["kind"] for d in yaml.safe_load_all(r.stdout)] == ["Deployment", "ConfigMap"]


# A Volcano Job whose worker reuses the master's pod spec through an anchor; each task's own
# metadata decides. Every combination: the edit is surgical (anchor, flow list and comment kept)
# only when both templates need the same edit; otherwise exit 2 at the anchor, nothing written.
ANCHORED_JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: vc
spec:
  tasks:
  - name: master
    template:
      metadata:
        annotations: {MASTER}
      spec: &task-spec
        containers:
        - name: c
          image: registry.example/train:1
          args: [a, b]  # flow list
  - name: worker
    template:
      metadata:
        annotations: {WORKER}
      spec: *task-spec
"""
SIZED = '{"shmguard.io/batch-size": "32", "shmguard.io/num-workers": "4", "shmguard.io/sample-size": "SAMPLE"}'


@pytest.mark.parametrize("case,master,worker,expect", [
    ("both-same-size", SIZED.replace("SAMPLE", "1Mi"), SIZED.replace("SAMPLE", "1Mi"), "surgical"),
    ("different-sizes", SIZED.replace("SAMPLE", "1Mi"), SIZED.replace("SAMPLE", "8Mi"), "refused"),
    ("one-not-training", '{"shmguard.io/inject": "true"}', "{}", "refused"),
    ("one-opted-out", '{"shmguard.io/inject": "true"}', '{"shmguard.io/inject": "false"}', "refused"),
])
def test_anchor_shared_by_templates_every_combination(tmp_path, case, master, worker, expect):
    text = ANCHORED_JOB.replace("{MASTER}", master).replace("{WORKER}", worker)
    f = tmp_path / "job.yaml"
    f.write_text(text)
    anchor_line = text.splitlines().index("      spec: &task-spec") + 1
    for args in (["mutate", "-f", str(f)], ["mutate", "-i", "-f", str(f)]):
        r = subprocess.run([BIN, *args], capture_output=True, text=True)
        if expect == "surgical":
            assert r.returncode == 0, r.stderr
            if "-i" in args:
                out = f.read_text()
                f.write_text(text)
            else:
                out = r.stdout
            assert "spec: &task-spec" in out and "spec: *task-spec" in out and "args: [a, b]  # flow list" in out, out
            assert out.count("sizeLimit: 1Gi") == 1 and "re-emitted" not in r.stderr, out + r.stderr
        else:
            assert r.returncode == 2, (case, args, r.stdout, r.stderr)
            assert f"{f}:{anchor_line}: " in r.stderr and "nothing was written" in r.stderr, r.stderr
            assert f.read_text() == text, "the file was changed"
    if expect == "refused":
        r = subprocess.run([BIN, "mutate", "--allow-reformat", "-f", str(f)], capture_output=True, text=True)
        assert r.returncode == 0 and "&task-spec" not in r.stdout, r.stderr


def test_a_key_given_twice_is_warned_about_with_its_lines(tmp_path):
    """kubectl keeps the last of two equal keys without a word (one of two commands is lost);
    shmguard reads it the same way and says so, at the repeat's line, in the file's numbering."""
    f = tmp_path / "dup.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"
                 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: train\n"
                 "    image: pytorch/pytorch\n    command: [python, a.py]\n    command: [python, b.py]\n")
    r = run("check", "-f", str(f), "--fail-on", "warning")
    assert r.returncode == 1
    assert (f'{f}:14: warning: key "command" given twice in one mapping (also at line 13): kubectl keeps this '
            "last value and drops the first") in r.stdout, r.stdout
    assert "1 warning" in run("check", "-f", str(f)).stdout


def test_a_document_that_cannot_be_edited_in_place_is_not_rewritten_without_allow_reformat(tmp_path):
    # A stale sizeLimit that carries an anchor: replacing it in place would cut the anchor.
    f = tmp_path / "anchored.yaml"
    src = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    shmguard.io/size: 2Gi\n"
           "    shmguard.io/injected-size: 4Gi\nspec:\n  containers:\n  - name: c\n    image: pytorch/pytorch\n"
           "    volumeMounts:\n    - name: shmguard-dshm\n      mountPath: /dev/shm\n  volumes:\n"
           "  - name: shmguard-dshm\n    emptyDir:\n      medium: Memory\n      sizeLimit: &big 4Gi\n  # keep me\n")
    f.write_text(src)
    for args in (["-i"], []):
        r = run("mutate", *args, "-f", str(f))
        assert r.returncode == 2, r.stderr
        assert (f"{f}:1: cannot edit the document in place (the value at /spec/volumes/0/emptyDir/sizeLimit "
                "carries an anchor); nothing was written (--allow-reformat re-emits the document") in r.stderr
        assert r.stdout == "" and f.read_text() == src
    r = run("mutate", "--allow-reformat", "-f", str(f))
    assert r.returncode == 0 and "document re-emitted: the value at" in r.stderr
    assert yaml.safe_load(r.stdout)["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "2Gi"


def test_in_place_is_all_or_nothing_when_the_third_of_five_renames_fails(tmp_path):
    """Every file's new content is staged before any is replaced; when the third rename fails (a
    fault loaded with LD_PRELOAD), the two files already replaced get their old bytes back, the
    staged files are removed, and the error names the file and what was put back."""
    lib = os.environ.get("SHMGUARD_FAIL_RENAME_LIB") or str(Path(BIN).parent / "tests" / "libshmguard_fail_rename.so")
    if not Path(lib).exists():
        pytest.skip("the rename fault library is built with the tests (ctest sets SHMGUARD_FAIL_RENAME_LIB)")
    files = [tmp_path / f"job{i}.yaml" for i in range(1, 6)]
    for f in files:
        shutil.copy(EXAMPLE, f)
    before = {f: (f.read_bytes(), os.stat(f).st_ino) for f in files}
    env = dict(os.environ, LD_PRELOAD=lib, SHMGUARD_FAIL_RENAME="3",
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    r = subprocess.run([BIN, "mutate", "-i", "-f", str(tmp_path)], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2, r.stderr
    assert f"{files[2]}: cannot replace: Input/output error; the old content was put back in {files[0]} {files[1]}" \
        in r.stderr, r.stderr
    assert "rewritten" not in r.stderr and "NOT put back" not in r.stderr
    for f in files:
        assert f.read_bytes() == before[f][0], f
    assert sorted(p.name for p in tmp_path.iterdir()) == [f.name for f in files]  # no staged file left
    # Without the fault the same run rewrites all five.
    r = run("mutate", "-i", "-f", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert all("shmguard-dshm" in f.read_text() for f in files)
    assert r.stderr.count(": rewritten") == 5
