"""Error goldens for the offline path: bad input -> the exact exit code, stdout and stderr.

Each case is a folder of tests/golden/errors/: `args` (the command line after `shmguard`, split on
spaces), its input files, `stdin` when the command reads one, and `golden.txt`, what the binary
said. The command runs in a copy of the folder, so the names in messages are the files' own; the
inputs must come out byte for byte as they went in (bad input loses nothing). REFRESH_GOLDEN=1
rewrites golden.txt."""
import os
import shutil
import subprocess

import pytest

from pylib.paths import BIN, SRC

CASES = SRC / "tests" / "golden" / "errors"
NAMES = sorted(p.name for p in CASES.iterdir() if p.is_dir())


def inputs(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and p.name not in ("args", "golden.txt")}


def transcript(args, proc):
    return (f"$ shmguard {args}\nexit {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_gets_its_exact_message_and_loses_nothing(name, tmp_path):
    case = CASES / name
    work = tmp_path / name
    shutil.copytree(case, work, ignore=shutil.ignore_patterns("args", "golden.txt"))
    args = (case / "args").read_text().strip()
    stdin = (case / "stdin").read_bytes() if (case / "stdin").exists() else b""
    proc = subprocess.run([BIN] + args.split(" "), cwd=work, input=stdin, capture_output=True, timeout=60)
    proc.stdout, proc.stderr = (s.decode("utf-8", "backslashreplace") for s in (proc.stdout, proc.stderr))
    actual = transcript(args, proc)
    golden = case / "golden.txt"
    if os.environ.get("REFRESH_GOLDEN"):
        golden.write_text(actual)
    assert golden.exists(), f"missing {golden} (REFRESH_GOLDEN=1 writes it)"
    assert actual == golden.read_text()
    assert proc.returncode != 0 or "warning" in proc.stderr + proc.stdout, "an error case that passed silently"
    assert inputs(work) == inputs(case), "an input file was changed"


def test_every_case_has_args_and_a_golden():
    assert len(NAMES) >= 12
    for name in NAMES:
        assert (CASES / name / "args").exists(), name
        assert (CASES / name / "golden.txt").exists(), name
