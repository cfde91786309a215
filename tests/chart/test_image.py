"""The container image, checked without a Docker engine: builds the binary the way the
Dockerfile's build stage does and checks that every shared library it needs is provided by a
package the runtime stage installs (or that debian-slim ships), and that the runtime stage runs
as non-root with an exec-form ENTRYPOINT."""
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
# Packages of debian:12-slim that the libraries below may come from without installing.
SLIM_BASE = {"libc6", "libstdc++6", "libgcc-s1", "zlib1g"}


def runtime_stage():
    return DOCKERFILE.split("AS runtime", 1)[1]


def runtime_packages():
    m = re.search(r"apt-get install -y --no-install-recommends\s*\\\s*\n(.*?)&&", runtime_stage(), re.S)
    assert m, "runtime stage must install its libraries with apt-get"
    return set(m.group(1).replace("\\", " ").split())


def package_of(path):
    real = os.path.realpath(path)
    for p in (path, real, real.replace("/usr/lib/", "/lib/"), real.replace("/lib/", "/usr/lib/", 1)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0]
    return None


@pytest.fixture(scope="module")
def image_binary(tmp_path_factory):
    build = tmp_path_factory.mktemp("image-build")
    m = re.search(r"RUN cmake -S \. -B /build (.*?) \\", DOCKERFILE)
    flags = m.group(1).split() if m else []
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DSHMGUARD_BUILD_TESTS=OFF"] + flags, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "-j", str(os.cpu_count()), "--target", "shmguard"], check=True,
                   stdout=subprocess.DEVNULL)
    return build / "shmguard"


def test_runtime_stage_provides_every_shared_library(image_binary):
    out = subprocess.run(["ldd", str(image_binary)], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"=> (\S+) \(", out)
    assert libs, out
    provided = runtime_packages() | SLIM_BASE
    missing = {}
    for lib in libs:
        pkg = package_of(lib)
        assert pkg, f"no Debian package owns {lib}"
        if pkg.split(":")[0] not in provided:
            missing[lib] = pkg
    assert not missing, f"runtime stage lacks packages for: {missing}"
    # And nothing a build-only package provides slips in (e.g. a -dev library).
    assert not any(p.endswith("-dev") for p in missing.values())


def test_binary_runs(image_binary):
    r = subprocess.run([str(image_binary), "version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("shmguard ")


def test_runtime_stage_is_hardened():
    stage = runtime_stage()
    assert re.search(r"^FROM (debian:12-slim|gcr\.io/distroless/cc\S*) AS runtime$", DOCKERFILE, re.M)
    assert re.search(r"^USER 65532", stage, re.M)
    assert re.search(r'^ENTRYPOINT \["/usr/local/bin/shmguard"\]', stage, re.M)
    assert "ctest" in DOCKERFILE.split("AS runtime")[0], "the build stage must run the tests"
