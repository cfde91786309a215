"""README.md's install-and-verify steps, run as written against hack/cluster.sh, so that README
drift fails CI: the commands are read out of README's "Install with Helm" section, not copied
here. What differs from a reader's run: each `helm install` gets `--set
image.repository=shmguard,image.tag=dev --no-hooks` (no registry holds the image, and this cluster
has no kubelet), the image then runs in Docker as the release's webhook (test_chart_install's
helpers) as a kubelet would run the Deployment, and the namespace `shmguard` is renamed so that
earlier tests' leftovers (no namespace controller here) cannot hide a wrong step."""
import re
import shutil
import subprocess
import time

import pytest
import yaml

from pylib.paths import HACK, SRC
from pylib.cluster import IMAGE, docker, endpoints_for, files_from, wait_ready
from pylib.readme_blocks import commands, section

EXTRA = " --set image.repository=shmguard,image.tag=dev --no-hooks"


def in_namespace(cmd, ns):
    return re.sub(r"(--namespace|-n) shmguard\b", rf"\1 {ns}", cmd).replace("create namespace shmguard",
                                                                          f"create namespace {ns}")


def sh(cluster, cmd, cwd, check=True):
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=cluster.env, cwd=cwd, timeout=180)
    if check and r.returncode != 0:
        raise AssertionError(f"README command failed: {cmd}\n{r.stdout}\n{r.stderr}")
    return r


def test_readme_commands_are_found():
    cmds = commands(section("Install with Helm"))
    assert "helm install shmguard charts/shmguard --namespace shmguard --create-namespace" in cmds
    assert any(c.startswith("kubectl create --dry-run=server -f examples/pod-pytorch-image.yaml") for c in cmds)
    assert cmds.index("kubectl create namespace shmguard") < \
        next(i for i, c in enumerate(cmds) if "create secret tls shmguard-serving-cert" in c)


def test_cluster_sh_env_is_evaluated_and_private(cluster):
    env = {"PATH": "/usr/bin:/bin", "CLUSTER_DIR": cluster.env["CLUSTER_DIR"], "HOME": "/tmp"}
    r = subprocess.run(["bash", "-c", f'eval "$({HACK}/cluster.sh env)" && kubectl get --raw /readyz && '
                                      'stat -c %a "$KUBECONFIG"'], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.replace("ok", "ok ").split() == ["ok", "600"], r.stdout  # /readyz has no newline


@pytest.mark.skipif(not IMAGE or not shutil.which("docker"), reason="no image (hack/test.sh builds it into SHMGUARD_IMAGE)")
def test_install_and_verify_as_the_readme_says(cluster, tmp_path):
    cmds = commands(section("Install with Helm"))
    install = "helm install shmguard charts/shmguard --namespace shmguard --create-namespace"
    verify_endpoints = "kubectl -n shmguard get endpoints shmguard"
    verify_size = next(c for c in cmds if c.startswith("kubectl create --dry-run=server -f examples/pod-pytorch-image.yaml"))
    assert install in cmds and verify_endpoints in cmds
    ns = "readme"
    install, verify_endpoints = in_namespace(install, ns), in_namespace(verify_endpoints, ns)
    name = None
    try:
        out = sh(cluster, install + EXTRA, SRC).stdout
        assert "STATUS: deployed" in out
        # NOTES: the endpoint check they print is the README's.
        assert verify_endpoints in out
        # Nothing ready yet, what NOTES warn about. (This control plane has no endpoints controller:
        # the object is missing rather than empty.)
        r = sh(cluster, verify_endpoints, SRC, check=False)
        assert "<none>" in r.stdout or "NotFound" in r.stderr, (r.stdout, r.stderr)
        tls, cfg = files_from(cluster, ns, tmp_path)
        c = cluster.get("deployment", "shmguard", "-n", ns)["spec"]["template"]["spec"]["containers"][0]
        name = "shmguard-readme-" + str(int(time.time()))
        docker("run", "-d", "--name", name, "--user", "65532:65532", "--read-only", "--cap-drop", "ALL",
               "-v", f"{tls}:/etc/shmguard/tls:ro", "-v", f"{cfg}:/etc/shmguard/config:ro", IMAGE, *c["args"])
        ip = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name).stdout.strip()
        wait_ready(ip, 9090)
        endpoints_for(cluster, ns, ip)
        assert ip in sh(cluster, verify_endpoints, SRC).stdout
        deadline = time.time() + 30
        while True:  # the API server picks up new Endpoints asynchronously
            r = sh(cluster, verify_size, SRC, check=False)
            if r.stdout.strip() == "8Gi" or time.time() > deadline:
                break
            time.sleep(0.5)
        assert r.stdout.strip() == "8Gi", f"the README's Verify step printed {r.stdout!r} {r.stderr}"
    finally:
        if name:
            docker("rm", "-f", name, check=False)
        cluster.helm("uninstall", "shmguard", "-n", ns, check=False)
        cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)


def test_existing_secret_recipe_runs_in_order(cluster, tmp_path):
    """The existingSecret recipe on a cluster that has no shmguard namespace yet."""
    cmds = commands(section("Install with Helm"))
    i = cmds.index("kubectl create namespace shmguard")
    recipe = cmds[i:i + 3]
    assert "create secret tls shmguard-serving-cert" in recipe[1] and recipe[2].startswith("helm install")
    ns = "readme-es"
    recipe = [in_namespace(c, ns) for c in recipe]
    subprocess.run([str(HACK / "gen-certs.sh"), str(tmp_path), "shmguard", ns], check=True, capture_output=True)
    (tmp_path / "charts").symlink_to(SRC / "charts")  # the README runs from the repository's top
    try:
        for cmd in recipe:
            sh(cluster, cmd + (EXTRA if cmd.startswith("helm install") else ""), tmp_path)
        mwc = cluster.get("mutatingwebhookconfiguration", f"shmguard-{ns}")
        assert mwc["webhooks"][0]["clientConfig"]["caBundle"]
        deploy = yaml.safe_dump(cluster.get("deployment", "shmguard", "-n", ns))
        assert "shmguard-serving-cert" in deploy
    finally:
        cluster.helm("uninstall", "shmguard", "-n", ns, check=False)
        cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)


@pytest.mark.skipif(not IMAGE or not shutil.which("docker"), reason="no image (hack/test.sh builds it into SHMGUARD_IMAGE)")
def test_the_image_is_the_cli_as_the_readme_says(tmp_path):
    """README's `docker run` lines name the image hack/test.sh builds with hack/image.sh (no registry
    publishes one), and run as written with it."""
    block = section("Install the CLI")
    run_check = next(c for c in commands(block) if c.startswith("docker run") and " check " in c)
    run_mutate = next(c for c in commands(block) if c.startswith("docker run") and " mutate" in c)
    repo = tmp_path / "repo"
    shutil.copytree(SRC / "examples", repo / "k8s")
    shutil.copy(SRC / "examples" / "pytorchjob-resnet.yaml", repo / "job.yaml")
    for p in [tmp_path, *repo.rglob("*"), repo]:
        p.chmod(0o755 if p.is_dir() else 0o644)  # readable by the image's uid 65532, as the README says
    image_ref = re.search(r"\s(shmguard:\S+)", run_check).group(1)
    assert image_ref == "shmguard:test" and f"hack/image.sh {image_ref}" in block, block
    r = subprocess.run(["bash", "-c", run_check.replace(image_ref, IMAGE)], cwd=repo, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stderr  # the examples hold training pods without /dev/shm: findings
    assert "k8s/pytorchjob-resnet.yaml:" in r.stdout and "PyTorchJob/resnet50" in r.stdout, r.stdout
    r = subprocess.run(["bash", "-c", run_mutate.replace(image_ref, IMAGE)], cwd=repo, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "shmguard-dshm" in (repo / "job.injected.yaml").read_text()
