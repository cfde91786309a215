"""The documentation holds together: README.md stays a front door (under 300 lines), every relative
link in README.md and docs/*.md reaches a file, and every `#anchor` a heading of that file (as
GitHub makes anchors of headings). And the sections that the cluster and node tests run as written
exist, with the commands they run, so that moving a step fails here and not only on a cluster."""
import re

import pytest

from pylib.paths import SRC
from pylib.readme_blocks import commands, section

README = SRC / "README.md"
DOCS = sorted((SRC / "docs").glob("*.md"))
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def prose(text):
    """The text without fenced blocks and inline code, where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading):
    """GitHub's anchor for a heading: lowercase, inline markup and punctuation dropped (but `-` and
    `_`), each space a `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = re.sub(r"[^\w\- ]", "", text.replace("`", ""))
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for h in HEADING.findall(FENCE.sub("", path.read_text())):
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(path, root=SRC):
    bad = []
    for target in LINK.findall(prose(path.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{path.relative_to(root)}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{path.relative_to(root)}: {target}: no heading #{anchor} in {dest.relative_to(root)}")
    return bad


def test_readme_is_a_front_door():
    lines = README.read_text().count("\n")
    assert lines < 300, f"README.md has {lines} lines; move the detail into docs/"


def test_every_doc_is_linked_from_the_readme():
    linked = {t.partition("#")[0] for t in LINK.findall(prose(README.read_text()))}
    assert DOCS and [d.relative_to(SRC).as_posix() for d in DOCS if d.relative_to(SRC).as_posix() not in linked] == []


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_links_reach_a_file_and_a_heading(doc):
    assert broken_links(doc) == []


def test_the_check_sees_a_broken_link(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n## Two words\n\n[ok](#two-words) [x](#nope) [y](b.md) `[z](c.md)`\n"
                                   "```\n[in a block](d.md)\n```\n")
    assert broken_links(tmp_path / "a.md", root=tmp_path) == ["a.md: #nope: no heading #nope in a.md",
                                                              "a.md: b.md: no such file"]


def test_slugs_are_githubs():
    assert slug("Don't know your sample size?") == "dont-know-your-sample-size"
    assert slug("Is /dev/shm the right size?") == "is-devshm-the-right-size"
    assert slug("--observed") == "--observed"
    assert slug("Where each operator's users write the hints") == "where-each-operators-users-write-the-hints"


# ---- the sections the cluster and node tests run as written ----

def test_the_install_steps_the_cluster_and_node_tests_run_exist():
    cmds = commands(section("Install with Helm"))
    install = "helm install shmguard charts/shmguard --namespace shmguard --create-namespace"
    assert install in cmds  # tests/pylib/node.py, tests/cluster/test_readme.py
    i = cmds.index("kubectl create namespace shmguard")  # the existingSecret recipe, in order
    assert "create secret tls shmguard-serving-cert" in cmds[i + 1] and cmds[i + 2].startswith("helm install")
    verify = re.findall(r"```sh\n.*?```", section("Install with Helm"), re.S)
    verify = commands(next(b for b in verify if "helm test shmguard" in b))  # tests/node/test_readme.py
    assert [c.split()[0] for c in verify] == ["helm", "kubectl", "kubectl", "kubectl", "kubectl", "shmguard",
                                              "kubectl", "kubectl", "kubectl"], verify
    assert "kubectl -n shmguard get endpoints shmguard" in verify
    assert any(c.startswith("kubectl create --dry-run=server -f examples/pod-pytorch-image.yaml") for c in verify)
    # tests/node/test_install_check.py: the wait for installs without the check
    assert len([c for c in commands(section("The install check", doc="docs/install.md")) if "shmguard-probe" in c]) == 1


def test_the_image_steps_name_what_hack_image_sh_builds():
    block = section("Install the CLI")  # tests/cluster/test_readme.py runs its docker lines
    runs = [c for c in commands(block) if c.startswith("docker run")]
    assert any(" check " in c for c in runs) and any(" mutate" in c for c in runs), runs
    assert all(re.search(r"\sshmguard:test\s", c) for c in runs), runs
    assert "hack/image.sh shmguard:test" in block and '"$root/hack/image.sh" shmguard:test' in \
        (SRC / "hack" / "test.sh").read_text()
    assert "ghcr.io" not in block
