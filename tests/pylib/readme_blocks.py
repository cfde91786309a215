"""The sections and shell blocks of README.md and docs/*.md, for the tests that run the documented
commands as written (tests/cluster/test_readme.py, tests/node/test_readme.py, ...)."""
import re

from pylib.paths import SRC as ROOT

README = ROOT / "README.md"


def section(title, doc="README.md"):
    """The text of `doc`'s `## title` section (doc: a path from the repository's top, README.md
    by default, e.g. "docs/install.md"), up to the next `## ` heading."""
    text = (ROOT / doc).read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def commands(block_text):
    """Shell commands of the fenced blocks in `block_text`: continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", block_text, re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                out.append(re.sub(r"\s+", " ", line))
    return out
