"""The layering of webhook/ (README "Repository layout"), enforced: each module includes only
itself and the modules below it. CMake gives every module `webhook/` as its include root, so an
upward include of a header-only file would still build; this test is what refuses it."""
import re
from pathlib import Path

from conftest import SRC

WEBHOOK = SRC / "webhook"
# module -> the modules it may include (besides itself). Bottom-up.
ALLOWED = {
    "base": set(),
    "sizing": {"base"},
    "config": {"base", "sizing"},
    "inject": {"base", "sizing", "config"},
    "admission": {"base", "sizing", "config", "inject"},
    "manifests": {"base", "sizing", "config", "inject"},
    "server": {"base", "sizing", "config", "inject", "admission"},
    "cli": {"base", "sizing", "config", "inject", "admission", "manifests", "server"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def upward_includes(root):
    bad = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp") or path.parent == root:
            continue
        module = path.relative_to(root).parts[0]
        assert module in ALLOWED, f"{path}: module {module} is not in the layering table; add it"
        for m in INCLUDE.finditer(path.read_text()):
            dep = m.group(1)
            if dep != module and dep not in ALLOWED[module]:
                line = path.read_text()[:m.start()].count("\n") + 1
                bad.append(f"{path.relative_to(root)}:{line}: {module} includes {dep}/, which is not below it")
    return bad


def test_no_module_includes_one_above_it():
    assert upward_includes(WEBHOOK) == []


def test_the_check_catches_an_upward_include(tmp_path):
    (tmp_path / "sizing").mkdir()
    (tmp_path / "sizing" / "x.cpp").write_text('#include "sizing/x.h"\n#include "inject/inject.h"\n')
    assert upward_includes(tmp_path) == ["sizing/x.cpp:2: sizing includes inject/, which is not below it"]
