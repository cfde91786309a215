"""The Helm chart, installed for real into kube-apiserver, and the container image as its webhook.

- `helm install` under every ci/*-values.yaml (cert-manager's and the Prometheus operator's CRDs
  stubbed): the API server accepts every object the release renders.
- The selfSigned release, with the tests playing the kubelet's part: the image runs in Docker as
  the Deployment runs it (its args, uid 65532, read-only root, no capabilities, the chart's Secret
  and ConfigMap mounted read-only), Endpoints for the chart's Service point at the container's
  bridge address, and a PyTorch pod created through the API server comes back injected. The
  `helm test` pod's command runs against it too. `helm upgrade` keeps the certificate;
  `helm uninstall` leaves the pods alone.
No `--wait` (nothing becomes ready without a kubelet); hooks that are Pods are skipped with
`--no-hooks` (the test pod is checked by rendering in tests/chart and run here by hand).
"""
import json
import shutil
import time
import uuid

import pytest
import yaml

from pylib.cluster import IMAGE, docker, endpoints_for, files_from, wait_ready
from pylib.paths import SRC


CHART = SRC / "charts" / "shmguard"
CI_FILES = sorted((CHART / "ci").glob("*-values.yaml"))
MI = 1 << 20


def crd(group, kind, plural):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture(scope="module")
def stub_crds(cluster):
    """Just enough of cert-manager and the Prometheus operator for their objects to be stored."""
    for c in [crd("cert-manager.io", "Issuer", "issuers"), crd("cert-manager.io", "Certificate", "certificates"),
              crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors")]:
        cluster.apply(c)
    cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")


def manifest_objects(cluster, release, ns):
    text = cluster.helm("get", "manifest", release, "-n", ns).stdout
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("values_file", CI_FILES, ids=lambda p: p.name)
def test_helm_install_is_accepted(cluster, stub_crds, values_file):
    ns = "rel-" + values_file.name.split("-")[0]
    r = cluster.helm("install", "shmguard", str(CHART), "-n", ns, "--create-namespace", "--no-hooks",
                     "-f", str(values_file), "--set", "image.repository=shmguard,image.tag=dev")
    try:
        assert "STATUS: deployed" in r.stdout, r.stdout
        objs = manifest_objects(cluster, "shmguard", ns)
        kinds = {o["kind"] for o in objs}
        assert {"Deployment", "Service", "ConfigMap", "MutatingWebhookConfiguration", "ServiceAccount",
                "PodDisruptionBudget"} <= kinds, kinds
        for o in objs:  # every rendered object is stored, as rendered
            args = [o["kind"], o["metadata"]["name"]] + (["-n", ns] if o["kind"] != "MutatingWebhookConfiguration" else [])
            stored = cluster.get(*args)
            assert stored["metadata"]["name"] == o["metadata"]["name"]
        wh = cluster.get("mutatingwebhookconfiguration", f"shmguard-{ns}")["webhooks"][0]
        assert wh["clientConfig"]["service"] == {"name": "shmguard", "namespace": ns, "path": "/mutate", "port": 443}
        if "certmanager" in values_file.name:
            assert cluster.get("certificate", "shmguard-tls", "-n", ns)["spec"]["secretName"]
        else:
            assert wh["clientConfig"]["caBundle"]
    finally:
        cluster.helm("uninstall", "shmguard", "-n", ns, check=False)


def test_two_releases_in_two_namespaces_coexist(cluster):
    """The MutatingWebhookConfiguration is cluster-scoped: one per release, named for its namespace."""
    try:
        for ns in ("team-a", "team-b"):
            r = cluster.helm("install", "shmguard", str(CHART), "-n", ns, "--create-namespace", "--no-hooks",
                             "--set", "image.repository=shmguard,image.tag=dev")
            assert "STATUS: deployed" in r.stdout, r.stdout + r.stderr
            # NOTES say how to see that the webhook answers, and what Ignore means until it does.
            assert f"kubectl -n {ns} get endpoints shmguard" in r.stdout and "failurePolicy is Ignore" in r.stdout
        for ns in ("team-a", "team-b"):
            wh = cluster.get("mutatingwebhookconfiguration", f"shmguard-{ns}")["webhooks"][0]
            assert wh["clientConfig"]["service"]["namespace"] == ns
    finally:
        for ns in ("team-a", "team-b"):
            cluster.helm("uninstall", "shmguard", "-n", ns, check=False)


@pytest.fixture
def release(cluster):
    ns = "shmguard"
    cluster.helm("install", "shmguard", str(CHART), "-n", ns, "--create-namespace", "--no-hooks",
                 "--set", "image.repository=shmguard,image.tag=dev")
    yield ns
    cluster.helm("uninstall", "shmguard", "-n", ns, check=False)


@pytest.mark.skipif(not IMAGE or not shutil.which("docker"), reason="no image (hack/test.sh builds it into SHMGUARD_IMAGE)")
def test_image_is_the_webhook_of_the_release(cluster, release, tmp_path):
    ns = release
    tls, cfg = files_from(cluster, ns, tmp_path)
    deploy = cluster.get("deployment", "shmguard", "-n", ns)
    pod_spec = deploy["spec"]["template"]["spec"]
    c = pod_spec["containers"][0]
    sc, psc = c["securityContext"], pod_spec["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["capabilities"]["drop"] == ["ALL"] and psc["runAsUser"] == 65532
    name = "shmguard-test-" + uuid.uuid4().hex[:8]
    t0 = time.time()
    # The Deployment's container, as a kubelet would run it.
    docker("run", "-d", "--name", name, "--user", f"{psc['runAsUser']}:{psc['runAsGroup']}", "--read-only",
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
           "-v", f"{tls}:/etc/shmguard/tls:ro", "-v", f"{cfg}:/etc/shmguard/config:ro", IMAGE, *c["args"])
    try:
        ip = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name).stdout.strip()
        assert ip and not ip.startswith("127."), ip
        wait_ready(ip, 9090)
        print(f"\ncontainer start to ready (docker run to /readyz 200): {time.time() - t0:.2f} s")
        # Endpoints for the chart's Service: what the endpoints controller would write.
        endpoints_for(cluster, ns, ip)
        ml = cluster.namespace("ml")
        pod = yaml.safe_load((SRC / "examples" / "pod-pytorch-image.yaml").read_text())
        deadline = time.time() + 30
        while True:  # the API server resolves the Service to the new Endpoints asynchronously
            r = cluster.kubectl("create", "--dry-run=server", "-n", ml, "-o", "json", "-f", "-",
                                stdin=json.dumps(pod), check=False)
            if r.returncode == 0 and "shmguard-dshm" in r.stdout:
                break
            assert time.time() < deadline, r.stdout[-500:] + r.stderr + docker("logs", name).stderr[-2000:]
            time.sleep(0.3)
        stored = json.loads(cluster.kubectl("create", "-n", ml, "-o", "json", "-f", "-", stdin=json.dumps(pod)).stdout)
        assert {"name": "shmguard-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in stored["spec"]["volumes"]
        assert stored["metadata"]["annotations"]["shmguard.io/injected-size"] == "8Gi"
        logs = docker("logs", name).stderr
        assert '"decision":"injected"' in logs and '"namespace":"ml"' in logs

        # The helm test pod's command, run from the image against the container (the Service's
        # port 443 is the container's 8443; the name resolves to the container as cluster DNS would).
        test_pod = [d for d in yaml.safe_load_all(cluster.helm("template", "shmguard", str(CHART), "-n", ns,
                                                                 "--set", "image.repository=shmguard,image.tag=dev")
                                                    .stdout) if d and d["kind"] == "Pod"][0]
        args = [a.replace(".svc:443/", ".svc:8443/") for a in test_pod["spec"]["containers"][0]["args"]]
        r = docker("run", "--rm", "--user", "65532:65532", "--read-only", "--cap-drop", "ALL",
                   "--add-host", f"shmguard.{ns}.svc:{ip}", "-v", f"{tls / 'ca.crt'}:/etc/shmguard/ca/ca.crt:ro",
                   IMAGE, *args, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "-> patched: /dev/shm 1Gi" in r.stdout, r.stdout

        # Upgrade keeps the selfSigned certificate; uninstall leaves created pods alone.
        before = cluster.get("secret", "shmguard-tls", "-n", ns)["data"]
        cluster.helm("upgrade", "shmguard", str(CHART), "-n", ns, "--no-hooks",
                     "--set", "image.repository=shmguard,image.tag=dev", "--set", "logLevel=debug")
        assert cluster.get("secret", "shmguard-tls", "-n", ns)["data"] == before
        assert "--log-level=debug" in cluster.get("deployment", "shmguard", "-n", ns)["spec"]["template"]["spec"]["containers"][0]["args"]
        cluster.helm("uninstall", "shmguard", "-n", ns)
        assert cluster.get("pod", stored["metadata"]["name"], "-n", ml)["metadata"]["uid"] == stored["metadata"]["uid"]
        assert cluster.kubectl("get", "mutatingwebhookconfiguration", f"shmguard-{ns}", check=False).returncode != 0
    finally:
        docker("rm", "-f", name, check=False)


@pytest.mark.skipif(not IMAGE or not shutil.which("docker"), reason="no image (hack/test.sh builds it into SHMGUARD_IMAGE)")
def test_image_is_small_non_root_and_minimal():
    info = json.loads(docker("image", "inspect", IMAGE).stdout)[0]
    size = info["Size"]
    print(f"\nimage {IMAGE}: {size / MI:.1f} MiB")
    assert size < 40 * MI, f"image is {size / MI:.1f} MiB"
    assert info["Config"]["User"] == "65532:65532"
    assert info["Config"]["Entrypoint"] == ["/usr/local/bin/shmguard"]
    r = docker("run", "--rm", "--read-only", "--cap-drop", "ALL", IMAGE, "version")
    assert r.stdout.startswith("shmguard ")
    # No shell or package manager to exploit or patch.
    assert docker("run", "--rm", "--entrypoint", "/bin/sh", IMAGE, "-c", "true", check=False).returncode != 0
    # The kubectl plugin name is in the image too.
    r = docker("run", "--rm", "--entrypoint", "/usr/local/bin/kubectl-shmguard", IMAGE, "--help")
    assert "kubectl shmguard" in r.stdout
