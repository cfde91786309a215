"""The offline path loses nothing and edits surgically.

1. Surgical goldens (tests/golden/edits/): `shmguard mutate` over each input must equal its
   `.golden` file (REFRESH_GOLDEN=1 rewrites them), differ from the input only by added text
   (lines, or items added inside a one-line flow collection) or by shmguard's own fields, read
   back as exactly the object the engine's patch makes (the independent re-emitter's `-o json`),
   stay JSON when the input is JSON, and be re-emitted only where the report says why.
2. No document lost: every example, golden input, edit case and corpus file, in groups, as
   separate files, as a directory, through stdin and mixed, with and without final newlines, with
   CRLF, leading and trailing `---` and comment-only documents: the output holds exactly the
   input's documents, in order, each equal to its input or to its input plus the injection.
"""
import difflib
import json
import os
import random
import re
from functools import partial

import pytest
import yaml

from pylib import cli
from pylib.paths import SRC

EDITS = SRC / "tests" / "golden" / "edits"
GOLDEN = SRC / "tests" / "golden"
CORPUS = SRC.parent / "shared" / "corpus"
OWNED = ("sizeLimit", "shmguard.io/injected-size", "shmguard.io/sizing")
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


run = partial(cli.run, text=False)  # bytes in and out: these tests compare bytes


def load_all(data):
    if isinstance(data, bytes):
        data = data.decode()
    return [d for d in yaml.load_all(data, Loader=Loader) if d is not None]


def edit_cases():
    return sorted(p.name for p in EDITS.iterdir() if ".golden." not in p.name)


def golden_path(name):
    stem, ext = name.rsplit(".", 1)
    return EDITS / f"{stem}.golden.{ext}"


def only_added(old_line, new_line):
    """True when new_line is old_line with characters inserted (an item added to a flow list)."""
    ops = difflib.SequenceMatcher(None, old_line, new_line, autojunk=False).get_opcodes()
    return all(tag in ("equal", "insert") for tag, *_ in ops)


NULL_VALUE = re.compile(r"^(\s*[^#]*:)\s*(~|null)(\s*(#.*)?)$")


def line_ok(old, new):
    """An old line may become a new one by added text, by shmguard rewriting its own field, or by
    losing a null that shmguard's collection replaces ("volumes: null" -> "volumes:")."""
    if any(k in old for k in OWNED):
        return True
    if only_added(old, new):
        return True
    m = NULL_VALUE.match(old.rstrip("\r\n"))
    return bool(m) and new.rstrip("\r\n").replace(" ", "") == (m.group(1) + m.group(3)).replace(" ", "")


def check_diff(before, after):
    """Every difference is an added line, a line with text added, or a line of shmguard's own."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    # A missing final newline on the input's last line is not a change of that line.
    if a and not a[-1].endswith("\n"):
        a[-1] += "\r\n" if "\r\n" in after else "\n"
    problems = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("equal", "insert"):
            continue
        old, new = a[i1:i2], b[j1:j2]
        j = 0
        for line in old:  # each old line must survive, in order, as a new line
            while j < len(new) and not line_ok(line, new[j]):
                j += 1
            if j == len(new):
                problems.append((tag, line, new))
                break
            j += 1
    return problems


@pytest.mark.parametrize("name", edit_cases())
def test_surgical_golden(name):
    src = EDITS / name
    before = src.read_bytes()
    r = run("mutate", "-f", str(src))
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout
    gpath = golden_path(name)
    if os.environ.get("REFRESH_GOLDEN"):
        gpath.write_bytes(out)
    assert gpath.exists(), f"missing {gpath} (REFRESH_GOLDEN=1 writes it)"
    assert out == gpath.read_bytes(), f"{name}: output differs from {gpath.name}"

    report = r.stderr.decode()
    # Templates sharing an anchor get their one edit at the anchored node: surgical too.
    assert "re-emitted" not in report, report
    assert out != before, "every edit case changes something"
    problems = check_diff(before.decode(), out.decode())
    assert not problems, f"{name}: lines changed that shmguard does not own: {problems}"
    if b"\r\n" in before:
        assert out.count(b"\n") == out.count(b"\r\n"), "CRLF documents keep CRLF on every line"
    if name.endswith(".json"):
        assert json.loads(out) is not None, "JSON input stays JSON"
    # Reads back as the object the engine's patch makes, written by the other (re-)emitter.
    docs = load_all(out)
    j = json.loads(run("mutate", "-o", "json", "-f", str(src)).stdout)
    expected = j["items"] if j.get("kind") == "List" and len(docs) > 1 else [j]
    assert docs == expected


def test_every_edit_golden_has_an_input():
    for p in EDITS.iterdir():
        if ".golden." in p.name:
            stem, ext = p.name.split(".golden.")
            assert (EDITS / f"{stem}.{ext}").exists(), f"{p.name} has no input"
    assert len(edit_cases()) >= 20


def test_check_reports_stale_with_line():
    src = EDITS / "18-stale-size.yaml"
    r = run("check", "-f", str(src))
    assert r.returncode == 1
    line = r.stdout.decode().splitlines()[0]
    assert line == f"{src}:7 Job/stale spec.template -> stale: has 1249Mi, needs 8194Mi", line
    again = run("mutate", "-f", "-", stdin=run("mutate", "-f", str(src)).stdout)
    assert run("check", "-f", "-", stdin=again.stdout).returncode == 0, "a mutated manifest checks clean"


# ---- 2. no document lost ----

def strip_injection(doc):
    """The document without what shmguard adds (its volume, mounts and annotations)."""
    doc = json.loads(json.dumps(doc, default=str))

    def visit(node):
        if isinstance(node, dict):
            spec = node.get("spec")
            if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
                strip_pod(node)
            for v in node.values():
                visit(v)
        elif isinstance(node, list):
            for v in node:
                visit(v)

    def strip_pod(pod):
        spec = pod["spec"]
        if isinstance(spec.get("volumes"), list):
            spec["volumes"] = [v for v in spec["volumes"] if not (isinstance(v, dict) and v.get("name") == "shmguard-dshm")]
            if not spec["volumes"]:
                del spec["volumes"]
        for field in ("containers", "initContainers", "ephemeralContainers"):
            for c in spec.get(field) or []:
                if isinstance(c, dict) and isinstance(c.get("volumeMounts"), list):
                    c["volumeMounts"] = [m for m in c["volumeMounts"]
                                         if not (isinstance(m, dict) and m.get("name") == "shmguard-dshm")]
                    if not c["volumeMounts"]:
                        del c["volumeMounts"]
        md = pod.get("metadata")
        if isinstance(md, dict) and isinstance(md.get("annotations"), dict):
            for k in ("shmguard.io/injected-size", "shmguard.io/sizing"):
                md["annotations"].pop(k, None)
            if not md["annotations"]:
                del md["annotations"]
            if not md:
                del pod["metadata"]
        for k in ("volumes",):
            if k in spec and spec[k] is None:
                del spec[k]
        for field in ("containers", "initContainers"):
            for c in spec.get(field) or []:
                if isinstance(c, dict) and c.get("volumeMounts", 0) is None:
                    del c["volumeMounts"]
        if isinstance(md, dict) and md.get("annotations", 0) is None:
            del md["annotations"]

    visit(doc)
    return doc


def sources():
    files = sorted(p for p in (SRC / "examples").iterdir() if p.suffix in (".yaml", ".json"))
    files += sorted(p for p in GOLDEN.glob("*.yaml") if ".golden." not in p.name and ".config." not in p.name)
    files += sorted(p for p in EDITS.iterdir() if ".golden." not in p.name)
    if CORPUS.is_dir():
        files += sorted(p for p in CORPUS.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    return files


def parses(data):
    try:
        load_all(data)
        return True
    except yaml.YAMLError:
        return False


VARIANTS = {
    "as-is": lambda t: t,
    "no-final-newline": lambda t: t.rstrip(b"\r\n"),
    "crlf": lambda t: t.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "leading-separator": lambda t: t if t.startswith(b"---") else b"---\n" + t,
    "trailing-separator": lambda t: (t if t.endswith(b"\n") else t + b"\n") + b"---\n",
    "comment-only-documents": lambda t: b"# header comment\n---\n# only a comment\n---\n" + t.rstrip(b"\n") +
                                        b"\n---\n# trailing comment-only document",
    # A %YAML directive opens the file: it stays with its document, and between files "..." keeps it a directive.
    "yaml-directive": lambda t: b"%YAML 1.1\n" + (t if t.startswith(b"---") else b"---\n" + t),
}


def groups(files, size, seed):
    files = list(files)
    random.Random(seed).shuffle(files)
    return [files[i:i + size] for i in range(0, len(files), size)]


def expected_docs(contents):
    out = []
    for c in contents:
        out += load_all(c)
    return out


def assert_same_documents(inputs, out_docs, where):
    assert len(out_docs) == len(inputs), f"{where}: {len(inputs)} documents in, {len(out_docs)} out"
    for i, (a, b) in enumerate(zip(inputs, out_docs)):
        assert strip_injection(b) == strip_injection(a), f"{where}: document {i + 1} changed beyond the injection"


def materialise(tmp, group, variant, seed):
    """The group's files with the variant applied, under names that sort in group order."""
    d = tmp / f"g{seed}-{variant}"
    d.mkdir()
    paths, contents = [], []
    for i, src in enumerate(group):
        data = VARIANTS[variant](src.read_bytes())
        p = d / f"{i:02d}-{src.stem}{src.suffix if src.suffix != '.yml' else '.yaml'}"
        p.write_bytes(data)
        paths.append(p)
        contents.append(data)
    return d, paths, contents


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_no_document_lost(tmp_path, variant):
    files = [f for f in sources() if parses(VARIANTS[variant](f.read_bytes()))]
    assert len(files) >= 60 or not CORPUS.is_dir()
    checked = 0
    for seed, group in enumerate(groups(files, 4, hash(variant) & 0xFFFF)):
        d, paths, contents = materialise(tmp_path, group, variant, seed)
        ways = {
            "files": ([x for p in paths for x in ("-f", str(p))], None, contents),
            "directory": (["-f", str(d)], None, contents),
            "stdin-between-files": (["-f", str(paths[0]), "-f", "-"] + [x for p in paths[2:] for x in ("-f", str(p))],
                                    contents[1] if len(paths) > 1 else None,
                                    [contents[0]] + contents[1:]),
        }
        for way, (args, stdin, ins) in ways.items():
            if way == "stdin-between-files" and len(paths) < 2:
                continue
            where = f"{variant}/{way}: {[p.name for p in group]}"
            flat = args
            r = run("mutate", *flat, stdin=stdin)
            assert r.returncode == 0, f"{where}: {r.stderr.decode()}"
            expected = expected_docs(ins)
            assert_same_documents(expected, load_all(r.stdout), where)
            rj = run("mutate", "-o", "json", *flat, stdin=stdin)
            assert rj.returncode == 0, f"{where} -o json: {rj.stderr.decode()}"
            j = json.loads(rj.stdout)
            items = j["items"] if j.get("kind") == "List" and not (len(expected) == 1 and expected[0].get("kind") == "List") else [j]
            assert_same_documents(expected, items, where + " -o json")
            checked += 1
    assert checked > 0


def test_threads_change_nothing(tmp_path):
    """`--jobs`: every example, golden input, edit case and corpus file (when the corpus is there)
    that mutate takes, as a directory and as one stdin stream, through mutate and check with one
    thread and with four: the same bytes out, the same report, in order."""
    files = [p for p in sources() if parses(p.read_bytes()) and run("mutate", "-f", str(p)).returncode == 0]
    assert len(files) >= 60 or not CORPUS.is_dir()
    texts = [p.read_bytes() for p in files]
    for i, (p, t) in enumerate(zip(files, texts)):
        (tmp_path / f"{i:03}-{p.name}").write_bytes(t)
    stream = b"".join(b"---\n" + t + (b"" if t.endswith(b"\n") else b"\n") for t in texts if not t.lstrip().startswith(b"{"))
    for args, stdin in ((["-f", str(tmp_path)], None), (["-f", "-"], stream)):
        outs = [run("mutate", *args, "-j", j, stdin=stdin) for j in ("1", "4")]
        assert outs[0].returncode == 0, outs[0].stderr
        assert outs[0].stderr.count(b"injected") >= 10 and b"sizeLimit" in outs[0].stdout
        assert outs[1].stdout == outs[0].stdout and outs[1].stderr == outs[0].stderr
        checks = [run("check", *args, "-o", "json", "--fail-on", "none", "-j", j, stdin=stdin) for j in ("1", "4")]
        assert checks[0].returncode == 0 and checks[1].stdout == checks[0].stdout
        assert len(json.loads(checks[0].stdout)["items"]) >= 20


def test_shmguards_volume_of_another_kind_is_replaced_in_its_place():
    """A volume named shmguard-dshm that is not a Memory emptyDir (refresh_patch's "replace
    /spec/volumes/N") is rewritten where it stands: the other volumes, comments and keys keep
    their bytes. The splicer used to refuse this edit ("cannot edit the document in place")."""
    head = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: stale\nspec:\n  template:\n    metadata:\n"
            "      labels:\n        training.kubeflow.org/job-name: j\n      annotations:\n"
            "        shmguard.io/size: 2Gi\n")
    mid = ("    spec:\n      containers:\n      - name: a\n        image: example/a:1\n        volumeMounts:\n"
           "        - name: shmguard-dshm\n          mountPath: /dev/shm\n      volumes:\n"
           "      - name: data   # keep me\n        emptyDir: {}\n      - name: shmguard-dshm\n")
    tail = "      restartPolicy: Never\n"
    src = head + mid + "        hostPath:\n          path: /dev/shm\n" + tail
    r = run("mutate", "-f", "-", stdin=src.encode())
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode() == (
        head + "        shmguard.io/injected-size: 2Gi\n        shmguard.io/sizing: \"explicit shmguard.io/size 2Gi (recognised by: annotation shmguard.io/size)\"\n"
        + mid + "        emptyDir:\n          medium: Memory\n          sizeLimit: 2Gi\n" + tail)
    assert "updated to 2Gi (was stale: volume shmguard-dshm is not a Memory emptyDir)" in r.stderr.decode()
    assert "re-emitted" not in r.stderr.decode()
