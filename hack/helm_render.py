"""Renders the chart the way `helm template` does: with `helm` when it is on PATH, else with
../shared/tools/helm-template (Helm's own template engine and function library), built on first
use. Used by hack/gen-deploy.sh and the chart tests."""
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "shmguard"
TOOL_SRC = ROOT.parent / "shared" / "tools" / "helm-template"
TOOL_BIN = Path(os.environ.get("SHMGUARD_HELM_TEMPLATE", "/tmp/shmguard-helm-template"))


class RenderError(Exception):
    pass


def renderer():
    """The command prefix that renders a chart, or None with the reason."""
    helm = shutil.which("helm")
    if helm:
        return "helm", None
    if TOOL_BIN.exists():
        return str(TOOL_BIN), None
    if not (TOOL_SRC / "build.sh").exists():
        return None, "neither helm nor ../shared/tools/helm-template is available"
    r = subprocess.run(["sh", str(TOOL_SRC / "build.sh"), str(TOOL_BIN)], capture_output=True, text=True)
    if r.returncode != 0 or not TOOL_BIN.exists():
        return None, "building helm-template failed: " + (r.stderr or r.stdout)[-2000:]
    return str(TOOL_BIN), None


def render(values_files=(), sets=(), namespace="shmguard", name="shmguard", chart=CHART, api_versions=()):
    """`api_versions`: what a cluster's discovery would add to .Capabilities (helm only)."""
    tool, why = renderer()
    if tool is None:
        raise RenderError(why)
    if os.path.basename(tool) == "helm":
        cmd = [tool, "template", name, str(chart), "--namespace", namespace]
    else:
        cmd = [tool, "--namespace", namespace, "--name", name]
    for f in values_files:
        cmd += ["-f", str(f)]
    for s in sets:
        cmd += ["--set", s]
    for v in api_versions:
        cmd += ["--api-versions", v]
    if os.path.basename(tool) != "helm":
        cmd.append(str(chart))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RenderError(r.stderr.strip() or r.stdout.strip())
    return r.stdout
