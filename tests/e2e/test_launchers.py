"""The launchers shmguard knows are one table (webhook/base/launchers.cpp): the config's default
`selection.commands`, the process count and `shmguard --help` read it. What repeats the list for
people, rule 6 of docs/sizing.md and the chart's values.yaml, must say the same, in order: a new
launcher is one row there, and this test names what else still has the old list."""
import re
import subprocess

import yaml

from pylib.paths import BIN, SRC


def from_help():
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=60)
    line = next(l for l in r.stdout.splitlines() if l.strip().startswith("commands (commands)"))
    return [c.strip() for c in line.split(")", 1)[1].strip().rstrip(";").split(",")]


def from_docs():
    text = (SRC / "docs" / "sizing.md").read_text()
    listed = re.search(r"`selection\.commands`, default:(.*?); the first word is the program", text, re.S)
    assert listed, "docs/sizing.md rule 6 no longer lists selection.commands' default"
    return re.findall(r"`([^`]+)`", listed.group(1))


def from_chart():
    values = yaml.safe_load((SRC / "charts" / "shmguard" / "values.yaml").read_text())
    return values["config"]["selection"]["commands"]


def test_the_launcher_table_is_what_help_docs_and_chart_list():
    table = from_help()
    assert "torchrun" in table and "composer" in table
    assert from_docs() == table, "docs/sizing.md rule 6"
    assert from_chart() == table, "charts/shmguard/values.yaml config.selection.commands"
