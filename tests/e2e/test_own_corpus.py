"""The project's own corpus (tests/corpus): real manifests from public projects, each with the
answer written down in tests/corpus/expected.yaml. `check -o json` must give every template its
decision, procs, DataLoader flags, rule-6 match and warnings; `mutate` must leave the file
byte-identical or only insert text; an invalid file must stop both with exit 2 at its line."""
import difflib
import json
import re
from pathlib import Path

import pytest
import yaml

from pylib.cli import run
from pylib.paths import SRC

CORPUS = SRC / "tests" / "corpus"
EXPECTED = yaml.safe_load((CORPUS / "expected.yaml").read_text())


def corpus_files():
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*")
                  if p.is_file() and p.name not in ("SOURCES.md", "expected.yaml"))


def test_every_file_has_an_answer_and_a_source():
    assert sorted(e["file"] for e in EXPECTED) == corpus_files()
    sources = (CORPUS / "SOURCES.md").read_text()
    for f in corpus_files():
        row = next((line for line in sources.splitlines() if line.startswith(f"| {f} |")), None)
        assert row, f"{f} is not in SOURCES.md"
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.fullmatch(r"[0-9a-f]{40}", cells[3]), row  # the commit it was taken at
        assert cells[4], row  # the license
    assert len(EXPECTED) >= 20


def template_answer(item):
    """An item of `check -o json` in expected.yaml's form."""
    t = {"template": item["template"], "decision": item["decision"]}
    if item.get("procs"):
        t["procs"] = f'{item["procs"]["count"]} from {item["procs"]["source"]}'
    sizing = item.get("sizing") or ""
    if m := re.search(r"from the command: ([^;)]*)", sizing):
        t["flags"] = m.group(1).split(", ")
    # Every sizing text names its rule; expected.yaml writes down rule 6's (what a command matched).
    if (m := re.search(r"recognised by: ([^;)]*)", sizing)) and not re.match(r"(label|image|annotation) ", m.group(1)):
        t["recognisedBy"] = m.group(1)
    if item["warnings"]:
        t["warnings"] = [w["message"] for w in item["warnings"]]
    return t


def only_insertions(before, after):
    """True when `after` is `before` with text inserted; a block scalar header's added strip
    indicator ("|" -> "|-", docs/cli.md "mutate") counts as an insertion too."""
    ops = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    return all(op in ("equal", "insert") for op, *_ in ops)


@pytest.mark.parametrize("entry", EXPECTED, ids=[e["file"].split("/")[-1] for e in EXPECTED])
def test_shmguard_answers_as_written_down(entry):
    path = CORPUS / entry["file"]
    src = path.read_text()
    check = run("check", "-o", "json", "--fail-on", "none", "-f", str(path))
    mutate = run("mutate", "-f", str(path))
    if entry["edit"] == "invalid":
        want = entry["error"].replace("FILE", str(path))
        for r in (check, mutate):
            assert r.returncode == 2 and want in r.stderr, r.stderr
        assert mutate.stdout == ""
        return
    assert check.returncode == 0, check.stderr
    got = [template_answer(i) for i in json.loads(check.stdout)["items"]]
    assert got == entry["templates"]
    assert mutate.returncode == 0, mutate.stderr
    assert "re-emitted" not in mutate.stderr, mutate.stderr
    if entry["edit"] == "byte-identical":
        assert mutate.stdout == src
    else:
        assert entry["edit"] == "add-only"
        assert mutate.stdout != src and only_insertions(src, mutate.stdout)
        # What was added is shmguard's and nothing else: the same objects once its lines are read.
        out = list(yaml.safe_load_all(mutate.stdout))
        for doc in out:
            assert "shmguard-dshm" in json.dumps(doc) or doc in list(yaml.safe_load_all(src))


def test_the_directory_walk_checks_the_yaml_files_and_names_the_invalid_one():
    # expected.yaml is YAML but no Kubernetes object: excluded, as a user would.
    r = run("check", "--skip-invalid", "--exclude", "expected.yaml", "-o", "json", "--fail-on", "none", str(CORPUS))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    invalid = [e["file"] for e in EXPECTED if e["edit"] == "invalid"]
    assert [s.split(": skipped")[0].split(str(CORPUS) + "/")[-1] for s in out["totals"]["skippedFiles"]] == invalid
    walked = {i["file"] for i in out["items"]}
    # `.yaml-template` is not a manifest extension: named files only.
    assert {Path(f).relative_to(CORPUS).as_posix() for f in walked} == {
        e["file"] for e in EXPECTED if e["edit"] != "invalid" and not e["file"].endswith("-template")}
