"""`shmguard observe` with the real PyTorch DataLoader workload of the proof: the peak it reports
lies between (W*P+1) and (W*P+2) batches above the DataLoader's own pages (measured idle), the
sample size it infers within the same window, the recommended size lets the workload finish, and
64 MiB ends in a reported bus error. Plus exit status passthrough, stdout untouched, a missing
command, and --shm-size without root."""
import json
import os
import shutil
import subprocess
from functools import partial

import pytest

from pylib import cli
from pylib.paths import BIN
from pylib.pytorch import PYTHON, WORKLOAD

MI = 1 << 20


run = partial(cli.run, "observe", timeout=300)  # `shmguard observe ARGS`


def torch_ok():
    if os.geteuid() != 0:
        return "needs root for --shm-size"
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        return "python3-torch is not installed"
    return None


TORCH = torch_ok()

# (batch, workers, sample bytes, prefetch): the consumer is slower than the workers, so every
# prefetch slot fills.
CONFIGS = [(64, 8, 256 * 1024, 2), (32, 4, 1 * MI, 2), (128, 3, 64 * 1024, 3)]  # all above 64 MiB


def workload(batch, workers, sample, prefetch):
    return [PYTHON, str(WORKLOAD), "--batch-size", str(batch), "--num-workers", str(workers), "--sample-size",
            str(sample), "--prefetch-factor", str(prefetch), "--steps", "16", "--step-seconds", "0.25"]


def idle_bytes(batch, workers, sample, prefetch):
    """What the workload's DataLoader holds in a private /dev/shm before its first batch exists
    (observe gives it the tmpfs and passes its stdout through)."""
    r = run("--shm-size", "64Mi", "--", *workload(batch, workers, sample, prefetch), "--idle")
    assert r.returncode == 0, r.stderr[-3000:]
    idle = json.loads(r.stdout.splitlines()[0])["idle_shm_bytes"]
    assert 0 < idle < MI, idle  # semaphores' pages, not a batch
    return idle


@pytest.mark.skipif(TORCH is not None, reason=TORCH or "")
@pytest.mark.parametrize("batch,workers,sample,prefetch", CONFIGS, ids=lambda v: str(v))
def test_peak_and_sample_size_of_a_real_dataloader(batch, workers, sample, prefetch, tmp_path):
    report = tmp_path / "report.json"
    r = run("--shm-size", "4Gi", "-o", "json", "--report", str(report), "--batch-size", str(batch), "--num-workers",
            str(workers), "--prefetch-factor", str(prefetch), "--", *workload(batch, workers, sample, prefetch))
    assert r.returncode == 0, r.stderr[-3000:]
    assert '"peak_shm_bytes"' in r.stdout, "the command's stdout is passed through untouched"
    rep = json.loads(report.read_text())
    # Every prefetch slot full plus the batch the loop holds: (W*P+1) batches, always reached. On
    # top of that, a worker may already be writing its next batch while the loop still holds the
    # previous one (tmpfs counts pages as they are written): part of one more batch, by timing. So
    # the invariant is a window one batch wide; a wrong slot count (W*P, W*(P+1)) falls outside.
    # Under both ends, the pages the DataLoader holds before any batch (a page per semaphore of its
    # queues: 17 with 3 workers, 32 with 8), measured with this torch. A run that filled the whole
    # extra batch once stood 17 pages above a window that left them out.
    idle = idle_bytes(batch, workers, sample, prefetch)
    slots = (workers * prefetch + 1) * batch
    expected = idle + slots * sample
    ceiling = idle + (slots + batch) * sample
    assert idle + slots * sample * 0.98 <= rep["peakBytes"] <= ceiling, (rep["peakBytes"], expected, ceiling)
    assert sample * 0.98 <= rep["sampleSizeBytes"] <= ceiling / slots, (rep["sampleSizeBytes"], sample)
    assert "shmguard.io/sample-size:" in rep["annotations"] and f'shmguard.io/batch-size: "{batch}"' in rep["annotations"]
    print(f"\nobserve b{batch} w{workers} p{prefetch} {sample}B: peak {rep['peakBytes'] / MI:.1f} MiB "
          f"(expected {expected / MI:.1f}), sample {rep['sampleSizeBytes']} B, size {rep['recommendedSize']}")

    # The recommended size is enough ...
    ok = run("--shm-size", rep["recommendedSize"], "--", *workload(batch, workers, sample, prefetch))
    assert ok.returncode == 0, ok.stderr[-3000:]
    # ... and a pod's default 64 MiB is not: observe says so.
    bad = run("--shm-size", "64Mi", "--", *workload(batch, workers, sample, prefetch))
    assert bad.returncode != 0
    assert "/dev/shm was too small" in bad.stderr and "larger --shm-size" in bad.stderr, bad.stderr[-2000:]
    assert "of the 64.0 MiB available" in bad.stderr


def test_exit_status_and_stdout_pass_through():
    r = run("--", "sh", "-c", "printf 'data\\n'; exit 3")
    assert r.returncode == 3 and r.stdout == "data\n"
    assert "shmguard observe: /dev/shm peak" in r.stderr
    r = run("--", "sh", "-c", "exit 0")
    assert r.returncode == 0
    r = run("--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + 15 and "killed by signal 15" in r.stderr
    # --report -: stdout is the report alone, the command's own output goes to stderr.
    r = run("-o", "json", "--report", "-", "--", "sh", "-c", "echo from-the-command; kill -BUS $$")
    rep = json.loads(r.stdout)
    assert r.returncode == 128 + 7 and rep["busError"] is True and rep["signal"] == 7
    assert "from-the-command" in r.stderr


def test_the_commands_stdout_is_its_own_byte_for_byte(tmp_path):
    """With -o json and no --report the report goes to stderr: a pipeline reading the command's
    output (say, a JSON line per step) sees exactly the command's bytes."""
    payload = bytes(range(256)) * 64 + b'{"step": 1}\n'
    src = tmp_path / "payload.bin"
    src.write_bytes(payload)
    for fmt in ("text", "json"):
        r = subprocess.run([BIN, "observe", "-o", fmt, "--", "cat", str(src)], capture_output=True, timeout=60)
        assert r.returncode == 0
        assert r.stdout == payload, fmt
        assert b"peak" in r.stderr.lower()
    r = subprocess.run([BIN, "observe", "-o", "json", "--", "cat", str(src)], capture_output=True, timeout=60)
    assert json.loads(r.stderr)["exitCode"] == 0  # cat writes nothing to stderr: the report alone


def test_missing_command_is_127():
    r = run("--", "/nonexistent/train.py")
    assert r.returncode == 127 and "/nonexistent/train.py: No such file or directory" in r.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to another user")
def test_shm_size_without_root_is_a_clear_error():
    r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", BIN, "observe",
                        "--shm-size", "1Gi", "--", "true"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--shm-size needs root" in r.stderr, r.stderr


def test_a_failed_run_or_one_without_shm_proposes_nothing():
    """A run that fails measured something other than the job, and one that never touched /dev/shm
    gives nothing to size from: no annotations (a sample-size of 0 would be refused), the status said."""
    r = run("--batch-size", "8", "--num-workers", "2", "--", "sh", "-c", "exit 3")
    assert r.returncode == 3
    assert "  the command exited with status 3: no annotations proposed (measure a run that succeeds)\n" in r.stderr
    assert "shmguard.io/" not in r.stderr, r.stderr
    r = run("--batch-size", "8", "--num-workers", "2", "--", "true")
    assert r.returncode == 0 and "the command never used /dev/shm: no annotations proposed" in r.stderr, r.stderr
    assert "sample-size" not in r.stderr, r.stderr
    r = run("-o", "json", "--report", "-", "--", "false")
    rep = json.loads(r.stdout)
    assert rep["exitCode"] == 1 and rep["annotations"] == "" and "recommendedSize" not in rep
    assert rep["noProposal"] == "the command exited with status 1: no annotations proposed (measure a run that succeeds)"
