"""Where things are: the checkout (SHMGUARD_SRC), the binary under test (SHMGUARD_BIN), hack/."""
import os
import subprocess
from pathlib import Path

SRC = Path(os.environ.get("SHMGUARD_SRC", Path(__file__).resolve().parents[2]))
BIN = os.environ.get("SHMGUARD_BIN", str(SRC / "build" / "shmguard"))
HACK = SRC / "hack"


def _sanitized():
    try:
        out = subprocess.run(["ldd", BIN], capture_output=True, text=True).stdout
    except OSError:
        return False
    return "libasan" in out or "libubsan" in out


# The binary under test was built with AddressSanitizer: slower, and its RSS follows ASan's
# quarantine rather than the program (leaks are caught by LeakSanitizer instead).
SANITIZED = _sanitized()
