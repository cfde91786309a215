"""What mutate and check read and what they say about it: --exclude as .gitignore reads a pattern,
merge-conflict markers named at their own line, a failed mutate that says nothing was written, and
check's invalid-file errors that name --skip-invalid."""
import json
import os
import re

import pytest

from pylib.cli import run


def pod(name):
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: train\n"
            f"    image: pytorch/pytorch:2.4.0\n")


CONFLICTED = """apiVersion: batch/v1
kind: Job
metadata:
  name: train
spec:
  template:
    metadata:
      annotations:
<<<<<<< HEAD
        shmguard.io/batch-size: "64"
=======
        shmguard.io/batch-size: "128"
>>>>>>> feature/bigger-batch
    spec:
      containers:
      - name: train
        image: pytorch/pytorch:2.4.0
"""
MARKER = 'merge-conflict marker "<<<<<<< HEAD" (resolve the conflict first)'


# ---- merge-conflict markers ----

def test_a_merge_conflict_marker_is_named_at_its_own_line(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(pod("first") + "---\n" + CONFLICTED)  # the marker is the file's line 18
    (tmp_path / "a.yaml").write_text(pod("a"))
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    for args in (["check", str(job)], ["check", "--skip-invalid", str(job)], ["mutate", "-f", str(job)],
                 ["mutate", "-i", str(tmp_path / "a.yaml"), str(job)]):
        r = run(*args)
        assert r.returncode == 2 and r.stdout == "", (args, r.stderr)
        assert r.stderr.endswith(f"shmguard: {job}:18: {MARKER}\n"), (args, r.stderr)
        assert "--skip-invalid" not in r.stderr and "invalid YAML" not in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before
    # CRLF, a later marker first reached inside a quoted string (which libyaml alone would read as
    # text), and stdin: the same message, the marker's own line.
    r = run("check", "-f", "-", stdin=pod("x").replace("\n", "\r\n") + '  annotations: {a: "one\r\n=======\r\n"}\r\n')
    assert r.returncode == 2 and r.stderr == 'shmguard: <stdin>:10: merge-conflict marker "=======" (resolve the conflict first)\n'
    # Indented, it is a block scalar's text: no conflict.
    script = pod("y").replace("    image:", "    args:\n    - |\n      <<<<<<< HEAD\n      =======\n    image:")
    r = run("check", "-f", "-", "--fail-on", "none", stdin=script)
    assert r.returncode == 0, r.stderr


# ---- --exclude ----

@pytest.fixture
def tree(tmp_path):
    for rel in ("chart/templates/job.yaml", "deploy/chart/x.yaml", "deploy/keep.yaml", "deploy/sub/x.yaml",
                "top.yaml", "templates-not/job.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(pod(rel.replace("/", "-").replace(".yaml", "")))
    return tmp_path


def checked(tree, *args):
    r = run("check", "--fail-on", "none", "-o", "json", *args, cwd=tree)
    assert r.returncode == 0, (args, r.stderr)
    return sorted(os.path.normpath(i["file"]) for i in json.loads(r.stdout)["items"])


ALL = ["chart/templates/job.yaml", "deploy/chart/x.yaml", "deploy/keep.yaml", "deploy/sub/x.yaml",
       "templates-not/job.yaml", "top.yaml"]


@pytest.mark.parametrize("root", [".", "./"])
@pytest.mark.parametrize("pattern,left_out", [
    # A name: a file or directory at any depth; "./" and a final "/" (directories only) as .gitignore.
    ("chart", ["chart/templates/job.yaml", "deploy/chart/x.yaml"]),
    ("./chart", ["chart/templates/job.yaml", "deploy/chart/x.yaml"]),
    ("chart/", ["chart/templates/job.yaml", "deploy/chart/x.yaml"]),
    ("x.yaml", ["deploy/chart/x.yaml", "deploy/sub/x.yaml"]),
    ("x.yaml/", []),
    ("templates*", ["chart/templates/job.yaml", "templates-not/job.yaml"]),
    ("ch?rt", ["chart/templates/job.yaml", "deploy/chart/x.yaml"]),
    # With a slash: a path below the -f directory; '*' stays within one name, '**' does not.
    ("deploy/chart", ["deploy/chart/x.yaml"]),
    ("./deploy/*", ["deploy/chart/x.yaml", "deploy/keep.yaml", "deploy/sub/x.yaml"]),
    ("*/x.yaml", []),
    ("*/*/x.yaml", ["deploy/chart/x.yaml", "deploy/sub/x.yaml"]),
    ("**/x.yaml", ["deploy/chart/x.yaml", "deploy/sub/x.yaml"]),
    ("deploy/**/x.yaml", ["deploy/chart/x.yaml", "deploy/sub/x.yaml"]),
    ("/chart", ["chart/templates/job.yaml"]),
    ("chart/templates/", ["chart/templates/job.yaml"]),
])
def test_exclude_reads_a_pattern_as_gitignore_does(tree, root, pattern, left_out):
    prefix = os.path.normpath(root)
    got = checked(tree, "-f", root, "--exclude", pattern)
    assert got == [os.path.normpath(os.path.join(prefix, p)) for p in ALL if p not in left_out], pattern


def test_exclude_below_another_directory_and_on_files_named_directly(tree):
    # Below -f deploy the paths are chart/x.yaml, keep.yaml, sub/x.yaml; the path as given counts too.
    assert checked(tree, "-f", "deploy", "--exclude", "chart") == ["deploy/keep.yaml", "deploy/sub/x.yaml"]
    assert checked(tree, "-f", "./deploy", "--exclude", "chart/x.yaml") == ["deploy/keep.yaml", "deploy/sub/x.yaml"]
    assert checked(tree, "-f", "deploy/", "--exclude", "deploy/chart") == ["deploy/keep.yaml", "deploy/sub/x.yaml"]
    # The name of the -f directory itself is not below it (as .gitignore never sees its own folder).
    assert checked(tree, "-f", "chart", "--exclude", "chart") == ["chart/templates/job.yaml"]
    # Files named on the command line (pre-commit passes them so): matched on their path as given.
    named = ["./deploy/chart/x.yaml", "deploy/keep.yaml", "chart/templates/job.yaml"]
    assert checked(tree, *named, "--exclude", "chart") == ["deploy/keep.yaml"]
    assert checked(tree, *named, "--exclude", "deploy/chart/*") == ["chart/templates/job.yaml", "deploy/keep.yaml"]
    absolute = str(tree / "deploy" / "keep.yaml")
    assert checked(tree, absolute, "--exclude", "deploy") == [absolute]  # above an absolute file: not the user's tree
    assert checked(tree, absolute, "top.yaml", "--exclude", str(tree / "deploy") + "/*") == ["top.yaml"]
    # One pattern per --exclude: the word after it is an input again (pre-commit appends the files).
    assert checked(tree, "--exclude", "chart", "deploy/keep.yaml", "chart/templates/job.yaml") == ["deploy/keep.yaml"]
    r = run("check", "-f", ".", "--exclude", "*.yaml", cwd=tree)
    assert r.returncode == 2 and "no input files found in ." in r.stderr


def test_an_excluded_directory_is_not_entered(tree):
    # A dangling link named like a manifest is an error, unless it lies in an excluded directory.
    (tree / "node_modules").mkdir()
    (tree / "node_modules" / "broken.yaml").symlink_to(tree / "missing.yaml")
    r = run("check", "-f", ".", cwd=tree)
    assert r.returncode == 2 and "node_modules/broken.yaml: cannot follow symlink" in r.stderr
    assert checked(tree, "-f", ".", "--exclude", "node_modules") == ALL
    assert checked(tree, "-f", ".", "--exclude", "broken.yaml") == ALL


def test_exclude_help_says_how_a_pattern_is_read():
    r = run("check", "--help")
    text = " ".join(r.stdout.split())
    assert "as .gitignore does" in text and "a NAME is a file or directory at any depth" in text
    assert "'./' never matters" in text


# ---- mutate says nothing was written when nothing was ----

def test_a_failed_mutate_reports_nothing_as_injected(tmp_path):
    (tmp_path / "a.yaml").write_text(pod("a"))
    (tmp_path / "b.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    (tmp_path / "c.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for args in (["mutate", "a.yaml", "b.yaml", "c.yaml"], ["mutate", "-i", "a.yaml", "b.yaml", "c.yaml"]):
        r = run(*args, cwd=tmp_path)
        assert r.returncode == 2 and r.stdout == "", r.stderr
        lines = r.stderr.splitlines()
        assert re.fullmatch(r"a\.yaml:1 Pod/a \(pod\) -> would inject \S+ \(not written\)", lines[0]), r.stderr
        assert re.match(r"shmguard: c\.yaml:\d+: invalid YAML", lines[-1]), r.stderr
        assert "injected" not in r.stderr and "rewritten" not in r.stderr
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # The same files without the bad one: the report as it always was.
    for args in (["mutate", "a.yaml", "b.yaml"], ["mutate", "-i", "a.yaml", "b.yaml"]):
        r = run(*args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert re.match(r"a\.yaml:1 Pod/a \(pod\) -> injected \S+\n", r.stderr) and "not written" not in r.stderr, r.stderr
    assert "shmguard-dshm" in (tmp_path / "a.yaml").read_text()


# ---- check's invalid-file errors name --skip-invalid ----

HINT = " (use --skip-invalid to report and skip such files)"


@pytest.mark.parametrize("text,message", [
    ("- just\n- a list\n", "values.yaml:1: document 1 is a list, expected a Kubernetes object (a mapping)"),
    ("a: [1,\n", "values.yaml:2: invalid YAML: "),
    ("a: \xff\n", "values.yaml:1: invalid YAML: "),
])
def test_check_names_skip_invalid_for_what_it_would_skip(tmp_path, text, message):
    (tmp_path / "values.yaml").write_text(text, encoding="latin-1")
    (tmp_path / "job.yaml").write_text(pod("j"))
    r = run("check", "-f", str(tmp_path))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    line = r.stderr.strip()
    assert line.startswith(f"shmguard: {tmp_path}/{message}") and line.endswith(HINT) and line.count("--skip-invalid") == 1, line
    r = run("check", "-f", str(tmp_path), "--skip-invalid", "--fail-on", "none")
    assert r.returncode == 0 and f"{tmp_path}/values.yaml: skipped (--skip-invalid)" in r.stdout + r.stderr
    # mutate has no such flag: its message stays as it was.
    r = run("mutate", "-f", str(tmp_path))
    assert r.returncode == 2 and "--skip-invalid" not in r.stderr and message in r.stderr, r.stderr


def test_check_does_not_name_skip_invalid_where_it_would_not_help(tmp_path):
    # A message that names it already, a path that does not exist, a bad flag value.
    (tmp_path / "values.yaml").write_text("replicaCount: 2\n")
    r = run("check", str(tmp_path / "values.yaml"))
    assert r.returncode == 2 and r.stderr.count("--skip-invalid") == 1, r.stderr
    r = run("check", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "--skip-invalid" not in r.stderr and "missing.yaml: No such file or directory" in r.stderr
    r = run("check", "--fail-on", "bogus", str(tmp_path))
    assert r.returncode == 2 and "--skip-invalid" not in r.stderr
