"""The layering of webhook/ (docs/development.md "Repository layout"), enforced: each module includes only
itself and the modules below it. CMake gives every module `webhook/` as its include root, so an
upward include of a header-only file would still build; this test is what refuses it."""
import re

from pylib.paths import SRC

WEBHOOK = SRC / "webhook"
# module -> the modules it may include (besides itself). Bottom-up.
ALLOWED = {
    "base": set(),
    "sizing": {"base"},
    "config": {"base", "sizing"},
    "inject": {"base", "sizing", "config"},
    "admission": {"base", "sizing", "config", "inject"},
    "manifests": {"base", "sizing", "config", "inject"},
    "monitor": {"base", "sizing", "config", "inject"},
    "kube": {"base"},
    "server": {"base", "sizing", "config", "inject", "admission", "kube"},
    "scrape": {"base", "sizing", "config", "inject", "monitor", "kube"},
    "files": {"base"},
    "measure": {"base"},
    "probe": {"base", "sizing", "config", "inject", "admission", "kube"},
    "cli": {"base", "sizing", "config", "inject", "admission", "manifests", "server", "monitor", "kube", "scrape", "files",
            "measure", "probe"},
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


# ---- files that fit in a sitting ----

MAX_FILE_LINES = 400


def long_files(root, limit=MAX_FILE_LINES, exempt=frozenset()):
    """Files in root/** (.h, .cpp) over `limit` lines, as "path (N lines)"."""
    found = []
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.suffix in (".h", ".cpp") and rel not in exempt:
            n = len(path.read_text().split("\n")) - (1 if path.read_text().endswith("\n") else 0)
            if n > limit:
                found.append(f"{rel} ({n} lines)")
    return found


def test_no_file_is_longer_than_400_lines():
    assert long_files(WEBHOOK) == []


def test_the_file_length_check_sees_a_long_file(tmp_path):
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "a.cpp").write_text("int x;\n" * 401)
    (tmp_path / "cli" / "b.h").write_text("int y;\n" * 400)
    (tmp_path / "c.txt").write_text("z\n" * 900)
    assert long_files(tmp_path) == ["cli/a.cpp (401 lines)"]
    assert long_files(tmp_path, exempt={"cli/a.cpp"}) == []


# ---- functions that fit on a screen ----

MAX_LINES = 60
SIGNATURE_END = re.compile(r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(->\s*[\w:<>]+)?\s*\{\s*$")


def long_functions(root, limit=MAX_LINES):
    """Function bodies in root/**.cpp longer than `limit` lines, as "path:line name (N lines)". A body
    starts at a line that ends a signature with "{" (not a control statement, not a lambda
    assignment) and ends at its matching "}"; strings and comments are ignored for braces."""
    found = []
    for path in sorted(root.rglob("*.cpp")):
        lines = path.read_text().split("\n")
        stack = []
        for n, line in enumerate(lines):
            code = re.sub(r'"(\\.|[^"\\])*"', '""', line)
            code = re.sub(r"'(\\.|[^'\\])'", "''", code).split("//")[0]
            for ch in code:
                if ch == "{":
                    stack.append(n)
                elif ch == "}" and stack:
                    start = stack.pop()
                    head = lines[start]
                    if (SIGNATURE_END.search(head) and not re.search(r"\b(if|for|while|switch|catch|else)\b", head)
                            and "=" not in head.split("(")[0] and n - start + 1 > limit):
                        m = re.search(r"([\w:~]+)\s*\(", head)
                        found.append(f"{path.relative_to(root)}:{start + 1} {m.group(1) if m else '?'} "
                                     f"({n - start + 1} lines)")
    return found


def test_no_function_is_longer_than_a_screen():
    assert long_functions(WEBHOOK) == []


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"  x += {i};" for i in range(70))
    (tmp_path / "a.cpp").write_text(f"int f(int x) {{\n{body}\n  if (x) {{\n  }}\n  return x;\n}}\n"
                                    "int g() { return 1; }\n")
    assert long_functions(tmp_path) == ["a.cpp:1 f (75 lines)"]


# ---- one way to fail ----

# A function that says it failed with a bool and puts why into a string it was handed.
BOOL_PLUS_STRING = re.compile(
    r"\bbool\s+[\w:]+\s*\([^)]*?(?<!const )std::string\s*[&*]\s*(err|error|errors|why|msg|message|reason|problem)\b")


def bool_plus_string_functions(root):
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        text = path.read_text()
        for m in BOOL_PLUS_STRING.finditer(text):
            found.append(f"{path.relative_to(root)}:{text[:m.start()].count(chr(10)) + 1}")
    return found


def test_no_function_fails_with_a_bool_and_an_error_string():
    """base/result.h: a fallible function returns Result<T> (or Status)."""
    assert bool_plus_string_functions(WEBHOOK) == []


def test_the_error_style_check_sees_one(tmp_path):
    (tmp_path / "a.cpp").write_text("int ok(const std::string& why);\n"
                                    "bool load(const std::string& path,\n          std::string& err) {\n")
    assert bool_plus_string_functions(tmp_path) == ["a.cpp:2"]


# Closed sets kept as tables (docs/development.md "Where a change goes"): the enum -> the one file that holds its
# table and may switch over it. Anywhere else, code reads the table.
TABLE_ENUMS = {"Rule": "cli/report.cpp", "Format": "cli/report.cpp", "AnnotationKind": "inject/annotations.cpp",
               "Reason": "base/reason.h", "Decision": "admission/review.cpp", "Level": "server/log.cpp",
               "LogLevel": "server/log.cpp"}
CASE = re.compile(r"\bcase\s+(\w+)::k\w+\s*:")
# A failure told apart by its text or by whether it has a line, instead of its kind
# (Result::kind<Enum>(), base/result.h).
BY_TEXT = re.compile(r"\.error\(\)\s*\.\s*(find|rfind|starts_with|compare)\s*\(|\.line\(\)\s*(>|!=)\s*0")
# A kind told by a sentinel string ("(pod)") instead of an enum, and facts about warnings kept in
# vectors beside the warnings (index-aligned) instead of in each Warning{text, about, line}.
SENTINEL = re.compile(r'[=!]=\s*"\([\w ]+\)"')
PARALLEL_WARNINGS = re.compile(r"std::vector<[\w:]+>\s+warning_\w+\s*[;=({]")


def table_and_kind_breaches(root):
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        rel, text = str(path.relative_to(root)), path.read_text()
        for m in CASE.finditer(text):
            if m.group(1) in TABLE_ENUMS and TABLE_ENUMS[m.group(1)] != rel:
                found.append(f"{rel}:{text[:m.start()].count(chr(10)) + 1}: switch over {m.group(1)} outside its table")
        for m in BY_TEXT.finditer(text):
            found.append(f"{rel}:{text[:m.start()].count(chr(10)) + 1}: a failure told apart by its text or line")
        for m in SENTINEL.finditer(text):
            found.append(f"{rel}:{text[:m.start()].count(chr(10)) + 1}: a kind told by a sentinel string")
        for m in PARALLEL_WARNINGS.finditer(text):
            found.append(f"{rel}:{text[:m.start()].count(chr(10)) + 1}: a vector beside the warnings")
    return found


def test_tables_are_switched_only_where_they_live_and_failures_by_their_kind():
    assert table_and_kind_breaches(WEBHOOK) == []


def test_the_table_and_kind_checks_see_a_breach(tmp_path):
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "x.cpp").write_text("switch (r) {\n  case Rule::kMissing: break;\n}\n"
                                            "if (edit.line() > 0) {}\nif (r.error().rfind(\"invalid YAML\", 0) == 0) {}\n"
                                            "if (ref.path == \"(pod)\") return;\n"
                                            "  std::vector<int> warning_lines;\n")
    assert table_and_kind_breaches(tmp_path) == [
        "cli/x.cpp:2: switch over Rule outside its table",
        "cli/x.cpp:4: a failure told apart by its text or line",
        "cli/x.cpp:5: a failure told apart by its text or line",
        "cli/x.cpp:6: a kind told by a sentinel string",
        "cli/x.cpp:7: a vector beside the warnings"]


# ---- the admission reason: one enum, its text in one table ----

ROW_NAME = re.compile(r'\.name = "([^"]+)"')
# Where the same word is another table's row (`.name = "stale"`: check's rule) or an HTTP header.
OTHER_USE = re.compile(r'(\.(name|one|many) = |header\()$')


def reason_spellings(root):
    """Each Reason's text (its row in base/reason.h) written as a string literal anywhere else in
    webhook/: the text belongs at the edge, read from the table by name(Reason)."""
    names = ROW_NAME.findall((root / "base" / "reason.h").read_text())
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp") or path == root / "base" / "reason.h":
            continue
        text = path.read_text()
        for name in names:
            for m in re.finditer(re.escape(f'"{name}"'), text):
                if not OTHER_USE.search(text[max(0, m.start() - 10):m.start()]):
                    found.append(f"{path.relative_to(root)}:{text[:m.start()].count(chr(10)) + 1}: {name}")
        for m in re.finditer(r'"http-"', text):
            found.append(f"{path.relative_to(root)}:{text[:m.start()].count(chr(10)) + 1}: http-")
    return found


def test_each_reason_is_spelled_once():
    assert len(ROW_NAME.findall((WEBHOOK / "base" / "reason.h").read_text())) >= 20
    assert reason_spellings(WEBHOOK) == []


def test_the_reason_check_sees_a_second_spelling(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "reason.h").write_text('{.reason = Reason::kStale, .name = "stale", .log = LogLevel::kInfo},\n')
    (tmp_path / "x.cpp").write_text('{.rule = Rule::kStale, .name = "stale"},\nr.reason = "stale";\n'
                                    'metrics.admission("rejected", "http-" + code);\n')
    assert reason_spellings(tmp_path) == ["x.cpp:2: stale", "x.cpp:3: http-"]


# ---- one home per fact ----

# A fact several modules need, written once: each pattern (outside comments) may appear only in
# its home, which the others read.
ONE_HOME = [
    (re.compile(r'"/dev/shm/?"'), "base/shm_path.h", "the /dev/shm path: kShmPath, is_shm_path"),
    (re.compile(r'"shmguard\.io/[\w.-]*"'), "inject/annotations.h", "a shmguard.io/ key or the prefix: inject/annotations.h"),
    (re.compile(r"\b(tolower|toupper)\s*\("), "base/text.cpp", "lowercasing: base/text.h lowercase()"),
    (re.compile(r"\bescape_label\w*\s*\(|\blabel_value\s*\("), "base/text.cpp", "Prometheus label escaping: prometheus_label()"),
]


def without_comments(line):
    """`line` up to a `//` that is not inside a string."""
    in_string = False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            in_string = not in_string
        elif not in_string and line.startswith("//", i):
            return line[:i]
    return line


def facts_out_of_their_home(root):
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        rel = str(path.relative_to(root))
        for n, line in enumerate(path.read_text().split("\n"), 1):
            code = without_comments(line)
            for pattern, home, what in ONE_HOME:
                if rel != home and pattern.search(code):
                    found.append(f"{rel}:{n}: {what}")
    return found


def test_each_shared_fact_has_one_home():
    assert facts_out_of_their_home(WEBHOOK) == []


def test_the_home_check_sees_a_second_spelling(tmp_path):
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "x.cpp").write_text(
        'if (p == "/dev/shm/") x();  // "/dev/shm" in a comment is fine\n'
        'ann["shmguard.io/size"] = "1Gi";\nstd::string m = "explicit shmguard.io/size 1Gi";\n'
        "c = std::tolower(c);\n")
    assert facts_out_of_their_home(tmp_path) == [
        "cli/x.cpp:1: the /dev/shm path: kShmPath, is_shm_path",
        "cli/x.cpp:2: a shmguard.io/ key or the prefix: inject/annotations.h",
        "cli/x.cpp:4: lowercasing: base/text.h lowercase()"]


# Each closed set's name says what it is: no two top-level enums share one (there were two
# `Verdict`s, recognition's and the monitor's).
TOP_ENUM = re.compile(r"^enum\s+class\s+(\w+)", re.M)


def test_no_two_enums_share_a_name():
    seen = {}
    for path in sorted(WEBHOOK.rglob("*")):
        if path.suffix in (".h", ".cpp"):
            for m in TOP_ENUM.finditer(path.read_text()):
                seen.setdefault(m.group(1), []).append(str(path.relative_to(WEBHOOK)))
    assert {name: files for name, files in seen.items() if len(files) > 1} == {}


# Every {enum, name, ...} table is checked against its enum's kCount (base/enum_table.h), so a
# new enumerator without its row fails to compile wherever it is added.
ENUM_ORDER = re.compile(r"in_enum_order\(\s*(\w+)\s*,.*?static_cast<std::size_t>\(\s*([\w:]+)\s*\)", re.S)


def tables_not_checked_by_kcount(root):
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp") or path.name == "enum_table.h":
            continue
        text = path.read_text()
        for m in ENUM_ORDER.finditer(text):
            if not m.group(2).endswith("::kCount"):
                found.append(f"{path.relative_to(root)}:{text[:m.start()].count(chr(10)) + 1}: {m.group(1)}")
    return found


def test_every_enum_table_is_checked_against_kcount():
    assert len([1 for p in WEBHOOK.rglob("*.[ch]*") if "in_enum_order(" in p.read_text()]) >= 5
    assert tables_not_checked_by_kcount(WEBHOOK) == []
