"""The Helm chart: rendered under every ci/*-values.yaml (with `helm` when on PATH, else Helm's
template engine from ../shared/tools/helm-template), values checked against values.schema.json,
the rendered config loaded by shmguard itself, certificates verified with openssl, and deploy/
checked to be exactly what hack/gen-deploy.sh generates from the chart."""
import base64
import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from pylib.paths import BIN, HACK, SRC as ROOT

# hack/helm_render.py is hack/gen_deploy.py's renderer (a script of hack/, not a test helper).
sys.path.insert(0, str(HACK))
from helm_render import CHART, RenderError, render, renderer  # noqa: E402

NS = "ml-system"
TOOL, WHY = renderer()
pytestmark = pytest.mark.skipif(TOOL is None, reason=WHY or "")
CI_FILES = sorted((CHART / "ci").glob("*-values.yaml"))


def objects(values_file=None, sets=(), api_versions=()):
    text = render([values_file] if values_file else [], sets, namespace=NS, name="shmguard", api_versions=api_versions)
    docs = [d for d in yaml.safe_load_all(text) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    return docs, by_kind


def one(by_kind, kind):
    """The one object of `kind` the release itself installs (hooks aside: helm test, the install check)."""
    objs = [o for o in by_kind.get(kind, []) if "helm.sh/hook" not in (o["metadata"].get("annotations") or {})]
    assert len(objs) == 1, f"expected one {kind}, got {len(objs)}"
    return objs[0]


def merged_values(values_file):
    base = yaml.safe_load((CHART / "values.yaml").read_text())
    over = yaml.safe_load(Path(values_file).read_text()) or {}

    def merge(a, b):
        for k, v in b.items():
            if isinstance(v, dict) and isinstance(a.get(k), dict):
                merge(a[k], v)
            else:
                a[k] = v
        return a
    return merge(base, over)


def test_every_ci_values_file_is_covered():
    names = {f.name for f in CI_FILES}
    assert {"selfsigned-values.yaml", "certmanager-values.yaml", "existingsecret-values.yaml",
            "custom-values.yaml"} <= names


# ---- values.schema.json ----

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


@pytest.mark.parametrize("values_file", [CHART / "values.yaml"] + CI_FILES, ids=lambda p: Path(p).name)
def test_values_match_the_schema(values_file):
    jsonschema.validate(merged_values(values_file), SCHEMA)


@pytest.mark.parametrize("path,value", [
    (["replicaCount"], "two"),
    (["unknownKey"], 1),
    (["certificates", "mode"], "letsencrypt"),
    (["config", "sizing", "max"], "lots"),
    (["config", "sizing", "maxx"], "1Gi"),
    (["config", "sizing", "headroom"], 0.5),
    (["config", "selection", "imageGlobs"], "*pytorch*"),
    (["webhook", "failurePolicy"], "Maybe"),
    (["tlsMinVersion"], "1.1"),
    (["resources", "requests", "cpu"], None),
])
def test_schema_rejects_bad_values(path, value):
    v = copy.deepcopy(yaml.safe_load((CHART / "values.yaml").read_text()))
    node = v
    for k in path[:-1]:
        node = node[k]
    if value is None:
        node["bogus"] = 1
        node = v["resources"]
        node["bogus"] = 1
    else:
        node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(v, SCHEMA)


# ---- rendering ----

@pytest.mark.parametrize("values_file", CI_FILES, ids=lambda p: p.name)
def test_render_common_objects(values_file):
    docs, by_kind = objects(values_file)
    values = merged_values(values_file)
    for kind in ["Deployment", "Service", "ServiceAccount", "ConfigMap", "MutatingWebhookConfiguration",
                 "PodDisruptionBudget"]:
        one(by_kind, kind)
    for d in docs:  # all in the release namespace, but the cluster-scoped and the install check's Role
        if d["kind"] in ("Role", "RoleBinding"):
            assert d["metadata"]["namespace"] == values["installCheck"]["namespace"], d
        elif not d["kind"].endswith(("WebhookConfiguration", "AdmissionPolicy", "AdmissionPolicyBinding", "ClusterRole",
                                     "ClusterRoleBinding")):
            assert d["metadata"]["namespace"] == NS, d["kind"]

    dep = one(by_kind, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == values["replicaCount"]
    lookup = values["config"].get("ownerLookup", {}).get("enabled", True)
    assert spec["automountServiceAccountToken"] is lookup  # the token only for the owner lookup
    assert one(by_kind, "ServiceAccount")["automountServiceAccountToken"] is lookup
    psc = spec["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 65532
    assert psc["seccompProfile"]["type"] == "RuntimeDefault"
    c = spec["containers"][0]
    csc = c["securityContext"]
    assert csc["readOnlyRootFilesystem"] is True and csc["allowPrivilegeEscalation"] is False
    assert csc["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["limits"] and c["resources"]["requests"]
    assert c["livenessProbe"]["httpGet"]["port"] == "metrics" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "--config=/etc/shmguard/config/config.yaml" in c["args"]
    assert f"--tls-min-version={values['tlsMinVersion']}" in c["args"]
    assert len(dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"]) == 64
    assert spec["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    if values["priorityClassName"]:
        assert spec["priorityClassName"] == values["priorityClassName"]
    pdb = one(by_kind, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == values["podDisruptionBudget"]["minAvailable"]

    mwc = one(by_kind, "MutatingWebhookConfiguration")
    wh = mwc["webhooks"][0]
    assert wh["failurePolicy"] == values["webhook"]["failurePolicy"]
    assert wh["sideEffects"] == "None" and wh["admissionReviewVersions"] == ["v1", "v1beta1"]
    assert wh["timeoutSeconds"] == values["webhook"]["timeoutSeconds"]
    assert wh["reinvocationPolicy"] == "IfNeeded" and wh["matchPolicy"] == "Equivalent"
    assert wh["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                            "resources": ["pods"], "scope": "Namespaced"}]
    svc = wh["clientConfig"]["service"]
    assert svc == {"name": "shmguard", "namespace": NS, "path": "/mutate", "port": 443}
    excluded = wh["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn"
    assert {"kube-system", "kube-node-lease", "kube-public", NS} <= set(excluded["values"])
    assert set(values["webhook"]["excludeNamespaces"]) <= set(excluded["values"])
    assert wh["objectSelector"]["matchExpressions"][0] == {"key": "shmguard.io/inject", "operator": "NotIn",
                                                           "values": ["false"]}
    # The helm test pod is the shmguard image asking the Service for a real admission, verifying
    # the certificate for the service name with the caBundle's CA; it is never injected itself.
    test_pod = [d for d in by_kind.get("Pod", []) if d["metadata"]["annotations"].get("helm.sh/hook") == "test"]
    assert len(test_pod) == 1
    assert test_pod[0]["metadata"]["labels"]["shmguard.io/inject"] == "false"
    deployment = by_kind["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    c = test_pod[0]["spec"]["containers"][0]
    assert c["image"] == deployment["image"] and "command" not in c
    assert c["args"][:2] == ["review", f"--server=https://shmguard.{NS}.svc:443/mutate"]
    assert {"--ca=/etc/shmguard/ca/ca.crt", "--test-pod"} <= set(c["args"])
    assert ("--expect-injected" in c["args"]) == (values.get("mode", "enforce") == "enforce")


VAP = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"


def hooks_of(by_kind, hook):
    return {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")): o
            for objs in by_kind.values() for o in objs
            if hook in (o["metadata"].get("annotations") or {}).get("helm.sh/hook", "").split(",")}


@pytest.mark.parametrize("values_file", CI_FILES, ids=lambda p: p.name)
def test_install_check_proves_the_path_after_install_and_upgrade(values_file):
    _, by_kind = objects(values_file, api_versions=[VAP])
    values = merged_values(values_file)
    post_install, post_upgrade = hooks_of(by_kind, "post-install"), hooks_of(by_kind, "post-upgrade")
    name, check_ns = "shmguard-install-check", values["installCheck"]["namespace"]
    assert set(post_install) == set(post_upgrade) == {
        ("ServiceAccount", name, NS), ("Role", name, check_ns), ("RoleBinding", name, check_ns),
        ("ValidatingAdmissionPolicy", f"{name}-{NS}", None), ("ValidatingAdmissionPolicyBinding", f"{name}-{NS}", None),
        ("Job", name, NS)}
    weights = {k[0]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for k, o in post_install.items()}
    assert max(w for k, w in weights.items() if k != "Job") < weights["Job"]  # RBAC and policy first
    for o in post_install.values():  # gone once the check succeeded; replaced by the next run
        assert o["metadata"]["annotations"]["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    # Least privilege: create pods in one namespace, for this ServiceAccount only, dry runs only.
    assert post_install[("Role", name, check_ns)]["rules"] == [{"apiGroups": [""], "resources": ["pods"],
                                                               "verbs": ["create"]}]
    assert post_install[("RoleBinding", name, check_ns)]["subjects"] == [
        {"kind": "ServiceAccount", "name": name, "namespace": NS}]
    vap = post_install[("ValidatingAdmissionPolicy", f"{name}-{NS}", None)]["spec"]
    assert vap["matchConditions"][0]["expression"] == f'request.userInfo.username == "system:serviceaccount:{NS}:{name}"'
    assert vap["validations"][0]["expression"] == "has(request.dryRun) && request.dryRun == true"
    assert vap["failurePolicy"] == "Fail"
    assert post_install[("ValidatingAdmissionPolicyBinding", f"{name}-{NS}", None)]["spec"]["validationActions"] == ["Deny"]
    job = post_install[("Job", name, NS)]["spec"]
    pod = job["template"]["spec"]
    assert job["backoffLimit"] == 0 and pod["serviceAccountName"] == name and pod["restartPolicy"] == "Never"
    assert job["template"]["metadata"]["labels"]["shmguard.io/inject"] == "false"
    c = pod["containers"][0]
    assert c["image"] == one(by_kind, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert c["args"][:3] == ["review", "--through-api-server", "--test-pod"]
    assert {f"--namespace={check_ns}", f"--wait={values['installCheck']['timeout']}",
            f"--webhook-service={NS}/shmguard"} <= set(c["args"])
    assert ("--expect-injected" in c["args"]) == (values.get("mode", "enforce") == "enforce")
    assert c["securityContext"]["readOnlyRootFilesystem"] and pod["securityContext"]["runAsNonRoot"]


def test_install_check_without_validating_admission_policy():
    """An API server before 1.30 serves no ValidatingAdmissionPolicy: the check runs on RBAC alone."""
    _, by_kind = objects()
    assert {k[0] for k in hooks_of(by_kind, "post-install")} == {"ServiceAccount", "Role", "RoleBinding", "Job"}


def test_install_check_off_and_its_timeout():
    _, by_kind = objects(sets=["installCheck.enabled=false"])
    assert not hooks_of(by_kind, "post-install")
    _, by_kind = objects(sets=["installCheck.timeout=1h30m", "installCheck.namespace=ml-jobs"])
    job = hooks_of(by_kind, "post-install")[("Job", "shmguard-install-check", NS)]
    assert job["spec"]["activeDeadlineSeconds"] == 5400 + 120
    assert "--namespace=ml-jobs" in job["spec"]["template"]["spec"]["containers"][0]["args"]
    with pytest.raises(RenderError, match="installCheck"):
        objects(sets=["installCheck.timeout=2 minutes"])


@pytest.mark.parametrize("values_file", CI_FILES, ids=lambda p: p.name)
def test_rendered_config_is_loaded_by_shmguard(values_file, tmp_path):
    _, by_kind = objects(values_file)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(one(by_kind, "ConfigMap")["data"]["config.yaml"])
    values = merged_values(values_file)
    r = subprocess.run([BIN, "size", "--batch-size", "1024", "--num-workers", "32", "--sample-size", "8Mi",
                        "--config", str(cfg), "-o", "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sizeLimit"] == values["config"]["sizing"]["max"]


def test_selfsigned_certificate(tmp_path):
    _, by_kind = objects(CHART / "ci" / "selfsigned-values.yaml")
    secret = one(by_kind, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    for k in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / k).write_bytes(base64.b64decode(secret["data"][k]))
    mwc = one(by_kind, "MutatingWebhookConfiguration")
    assert mwc["webhooks"][0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    r = subprocess.run(["openssl", "verify", "-CAfile", tmp_path / "ca.crt", tmp_path / "tls.crt"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    san = subprocess.run(["openssl", "x509", "-in", tmp_path / "tls.crt", "-noout", "-ext", "subjectAltName"],
                         capture_output=True, text=True).stdout
    names = {part.strip()[4:] for part in san.splitlines()[-1].split(",") if part.strip().startswith("DNS:")}
    assert names == {"shmguard", f"shmguard.{NS}", f"shmguard.{NS}.svc", f"shmguard.{NS}.svc.cluster.local"}, san
    pub = lambda args: subprocess.run(["openssl"] + args, capture_output=True).stdout  # noqa: E731
    assert pub(["x509", "-in", tmp_path / "tls.crt", "-noout", "-pubkey"]) == \
        pub(["pkey", "-in", tmp_path / "tls.key", "-pubout"])
    dep = one(by_kind, "Deployment")
    assert dep["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] == secret["metadata"]["name"]


def test_certmanager_chain():
    _, by_kind = objects(CHART / "ci" / "certmanager-values.yaml")
    assert "Secret" not in by_kind
    issuers = {i["metadata"]["name"]: i["spec"] for i in by_kind["Issuer"]}
    certs = {c["metadata"]["name"]: c["spec"] for c in by_kind["Certificate"]}
    assert issuers["shmguard-selfsigned"] == {"selfSigned": {}}
    assert certs["shmguard-ca"]["isCA"] is True and certs["shmguard-ca"]["issuerRef"]["name"] == "shmguard-selfsigned"
    assert issuers["shmguard-ca"] == {"ca": {"secretName": "shmguard-ca"}}
    serving = certs["shmguard-tls"]
    assert serving["issuerRef"]["name"] == "shmguard-ca"
    assert serving["dnsNames"] == ["shmguard", f"shmguard.{NS}", f"shmguard.{NS}.svc", f"shmguard.{NS}.svc.cluster.local"]
    assert serving["duration"] == "2160h" and serving["renewBefore"] == "360h"
    mwc = one(by_kind, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NS}/shmguard-tls"
    assert "caBundle" not in mwc["webhooks"][0]["clientConfig"]
    dep = one(by_kind, "Deployment")
    assert dep["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] == serving["secretName"]


def test_existing_secret():
    values = merged_values(CHART / "ci" / "existingsecret-values.yaml")
    _, by_kind = objects(CHART / "ci" / "existingsecret-values.yaml")
    assert "Secret" not in by_kind and "Certificate" not in by_kind
    mwc = one(by_kind, "MutatingWebhookConfiguration")
    assert mwc["webhooks"][0]["clientConfig"]["caBundle"] == values["certificates"]["existingSecret"]["caBundle"]
    dep = one(by_kind, "Deployment")
    assert dep["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] == "shmguard-serving-cert"


def test_custom_install():
    _, by_kind = objects(CHART / "ci" / "custom-values.yaml")
    np_ = one(by_kind, "NetworkPolicy")
    assert np_["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.0.0.0/24"}}]
    assert np_["spec"]["ingress"][1]["ports"][0]["port"] == "metrics"
    sm = one(by_kind, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    wh = one(by_kind, "MutatingWebhookConfiguration")["webhooks"][0]
    assert wh["namespaceSelector"]["matchLabels"] == {"shmguard.io/enabled": "true"}
    assert "monitoring" in wh["namespaceSelector"]["matchExpressions"][0]["values"]
    cfg = yaml.safe_load(one(by_kind, "ConfigMap")["data"]["config.yaml"])
    assert cfg["selection"]["injectInitContainers"] is True and cfg["sizing"]["prefetchFactor"] == 4


def test_config_change_rolls_pods():
    _, a = objects(CHART / "ci" / "selfsigned-values.yaml")
    _, b = objects(CHART / "ci" / "selfsigned-values.yaml", sets=["config.sizing.min=2Gi"])
    key = lambda k: one(k, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]  # noqa: E731
    assert key(a) != key(b)


def test_two_releases_in_two_namespaces_do_not_share_the_webhook_configuration():
    names = set()
    for ns in ("team-a", "team-b"):
        text = render([], [], namespace=ns, name="shmguard")
        mwc = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "MutatingWebhookConfiguration"]
        assert len(mwc) == 1
        names.add(mwc[0]["metadata"]["name"])
        assert mwc[0]["metadata"]["name"] == f"shmguard-{ns}"
        assert mwc[0]["webhooks"][0]["clientConfig"]["service"]["namespace"] == ns
    assert len(names) == 2


@pytest.mark.parametrize("sets,message", [
    (["config.sizing.min=2Gi", "config.sizing.max=1Gi"], "config.sizing.min (2Gi) is above config.sizing.max (1Gi)"),
    (["config.sizing.default=128Gi"], "config.sizing.default (128Gi) must lie between"),
    (["config.sizing.min=1.5e9", "config.sizing.max=1G"], "config.sizing.min (1.5e9) is above config.sizing.max (1G)"),
    (["config.sizing.max=lots"], "config.sizing.max"),  # the schema's own check
])
def test_cross_field_rules_fail_at_install(sets, message):
    """What shmguard would refuse at start (pods crash-looping while failurePolicy Ignore lets every
    pod through unsized) fails the install instead, with shmguard's own words."""
    with pytest.raises(RenderError) as e:
        objects(sets=sets)
    assert message in str(e.value), str(e.value)[-500:]


def test_headroom_as_number_or_numeric_string(tmp_path):
    # `--set config.sizing.headroom=1.2` gives the string "1.2"; --set-string too; a values file a number.
    for sets in (["config.sizing.headroom=1.2"], []):
        args = sets
        _, by_kind = objects(sets=args) if args else objects(sets=[])
        text = one(by_kind, "ConfigMap")["data"]["config.yaml"]
        cfg = yaml.safe_load(text)
        want = 1.2 if args else 1.5
        assert cfg["sizing"]["headroom"] == want and isinstance(cfg["sizing"]["headroom"], float)
        (tmp_path / "c.yaml").write_text(text)
        r = subprocess.run([BIN, "size", "--batch-size", "1", "--num-workers", "0", "--sample-size", "1Gi",
                            "--config", str(tmp_path / "c.yaml"), "-o", "json"], capture_output=True, text=True)
        assert r.returncode == 0 and f"x {want}" in json.loads(r.stdout)["explanation"], r.stdout + r.stderr
    with pytest.raises(RenderError):
        objects(sets=["config.sizing.headroom=fast"])


def test_bad_mode_and_missing_secret_fail():
    with pytest.raises(RenderError):
        objects(sets=["certificates.mode=letsencrypt"])
    with pytest.raises(RenderError):
        objects(sets=["certificates.mode=existingSecret"])


# ---- deploy/ ----

def test_deploy_is_generated_from_the_chart(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "hack" / "gen_deploy.py"), str(tmp_path)], check=True)
    def docs(path):
        # Real helm and the template tool order kinds differently: compare the objects, not the order.
        return sorted((json.dumps(d, sort_keys=True) for d in yaml.safe_load_all(path.read_text()) if d))

    for name in ["shmguard.yaml", "namespace.yaml", "kustomization.yaml"]:
        assert docs(tmp_path / name) == docs(ROOT / "deploy" / name), f"deploy/{name} is stale: run hack/gen-deploy.sh"


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl not installed")
def test_kustomize_builds_deploy():
    r = subprocess.run(["kubectl", "kustomize", str(ROOT / "deploy")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(r.stdout) if d]
    for k in ["Namespace", "Deployment", "Service", "MutatingWebhookConfiguration", "Certificate", "Issuer"]:
        assert k in kinds
    assert "Pod" not in kinds


def test_owner_lookup_can_only_get_jobsets_and_is_gone_when_off():
    docs, by_kind = objects()
    role = next(d for d in by_kind["ClusterRole"] if d["metadata"]["name"] == f"shmguard-{NS}-owner-lookup")
    assert role["rules"] == [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get"]}]
    binding = next(d for d in by_kind["ClusterRoleBinding"] if d["metadata"]["name"] == f"shmguard-{NS}-owner-lookup")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "shmguard", "namespace": NS}]
    cm = yaml.safe_load(one(by_kind, "ConfigMap")["data"]["config.yaml"])
    assert cm["ownerLookup"] == {"enabled": True, "timeoutMs": 500, "cacheSeconds": 30}
    docs, by_kind = objects(sets=["config.ownerLookup.enabled=false"])
    assert not [d for d in docs if d["metadata"]["name"] == f"shmguard-{NS}-owner-lookup"]
    assert one(by_kind, "ServiceAccount")["automountServiceAccountToken"] is False
    assert one(by_kind, "Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_monitor_is_off_by_default_and_least_privileged_when_on():
    docs, _ = objects()
    assert not [d for d in docs if d["metadata"]["name"].endswith("-monitor")]
    docs, by_kind = objects(sets=["monitor.enabled=true", "monitor.prometheusRule.enabled=true",
                                  "monitor.serviceMonitor.enabled=true", "monitor.period=1m", "monitor.events=false"])
    # Cluster-scoped objects carry the release's namespace: a second release elsewhere does not collide.
    mon = [d for d in docs if d["metadata"]["name"] in ("shmguard-monitor", f"shmguard-monitor-{NS}")]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in mon) == [
        ("ClusterRole", f"shmguard-monitor-{NS}"), ("ClusterRoleBinding", f"shmguard-monitor-{NS}"),
        ("Deployment", "shmguard-monitor"), ("PrometheusRule", "shmguard-monitor"), ("Service", "shmguard-monitor"),
        ("ServiceAccount", "shmguard-monitor"), ("ServiceMonitor", "shmguard-monitor")]
    binding = next(d for d in mon if d["kind"] == "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == f"shmguard-monitor-{NS}"
    role = next(d for d in mon if d["kind"] == "ClusterRole")
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {("", "nodes", "list"), ("", "nodes", "watch"), ("", "pods", "list"), ("", "pods", "watch"),
                       ("", "nodes/stats", "get"), ("", "events", "create"), ("", "namespaces", "list"),
                       ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get")}
    hook = one(by_kind, "MutatingWebhookConfiguration")["metadata"]["name"]
    # The webhook configuration: this release's only, by name.
    assert [r.get("resourceNames") for r in role["rules"] if "mutatingwebhookconfigurations" in r["resources"]] == [[hook]]
    assert all("resourceNames" not in r for r in role["rules"] if "mutatingwebhookconfigurations" not in r["resources"])
    dep = next(d for d in mon if d["kind"] == "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["args"][:4] == ["monitor", "--listen=0.0.0.0:9090", "--period=60", "--kubelet-timeout=5"]
    # The webhook's own config judges which pods are unprotected, read from the webhook's ConfigMap.
    assert "--config=/etc/shmguard/config/config.yaml" in c["args"] and f"--webhook-configuration={hook}" in c["args"]
    vols = dep["spec"]["template"]["spec"]["volumes"]
    assert vols == [{"name": "config", "configMap": {"name": "shmguard"}}]
    webhook_dep = next(d for d in by_kind["Deployment"] if d["metadata"]["name"] == "shmguard")
    assert (dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"] ==
            webhook_dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"])
    assert "--no-events" in c["args"] and "--kubelet-insecure-tls" not in c["args"]
    # The webhook's Service never selects a monitor pod, nor the monitor's a webhook pod.
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    webhook_svc = next(d for d in by_kind["Service"] if d["metadata"]["name"] == "shmguard")
    assert not all(pod_labels.get(k) == v for k, v in webhook_svc["spec"]["selector"].items())
    rule = next(d for d in mon if d["kind"] == "PrometheusRule")
    alerts = {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}
    assert alerts["ShmguardShmNearlyFull"]["expr"] == "shmguard_shm_used_bytes / shmguard_shm_size_bytes >= 0.9"
    assert alerts["ShmguardShmNearlyFull"]["for"] == "2m"
    assert alerts["ShmguardShmOversized"]["expr"] == "shmguard_shm_peak_bytes / shmguard_shm_size_bytes < 0.125"
    assert "{{ $labels.pod }}" in alerts["ShmguardShmNearlyFull"]["annotations"]["summary"]


def test_monitor_daemonset_mode_is_one_agent_per_node_with_its_own_node_only():
    docs, by_kind = objects(sets=["monitor.enabled=true", "monitor.mode=daemonset", "monitor.serviceMonitor.enabled=true",
                                  "monitor.prometheusRule.enabled=true"])
    mon = [d for d in docs if d["metadata"]["name"] in ("shmguard-monitor", f"shmguard-monitor-{NS}")]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in mon) == [
        ("ClusterRole", f"shmguard-monitor-{NS}"), ("ClusterRoleBinding", f"shmguard-monitor-{NS}"),
        ("DaemonSet", "shmguard-monitor"), ("PrometheusRule", "shmguard-monitor"), ("Service", "shmguard-monitor"),
        ("ServiceAccount", "shmguard-monitor"), ("ServiceMonitor", "shmguard-monitor")]
    assert not [d for d in by_kind["Deployment"] if d["metadata"]["name"] == "shmguard-monitor"]
    ds = one(by_kind, "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    c = spec["containers"][0]
    # Its node's pods (fieldSelector spec.nodeName) and its own kubelet, both from the downward API.
    assert "--node-name=$(NODE_NAME)" in c["args"] and "--kubelet-address=$(HOST_IP)" in c["args"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "HOST_IP": "status.hostIP"}
    assert c["args"][:4] == ["monitor", "--listen=0.0.0.0:9090", "--period=30", "--kubelet-timeout=5"]
    assert "--kubelet-ca=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" in c["args"]
    # Training nodes are tainted: an agent tolerates every taint unless told otherwise.
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert "nodeSelector" not in spec
    assert ds["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    # The least RBAC lets it do: no node list (the downward API names its node and address); the rest
    # cannot be narrowed to one node by RBAC, the agent asks only for its own.
    role = next(d for d in mon if d["kind"] == "ClusterRole")
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {("", "pods", "list"), ("", "pods", "watch"), ("", "nodes/stats", "get"), ("", "events", "create"),
                       ("", "namespaces", "list"), ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get")}
    # Prometheus scrapes every agent through the Service's endpoints (the ServiceMonitor, as in the
    # Deployment mode); a client of the Service (helm test) reaches the agent of its own node.
    svc = next(d for d in mon if d["kind"] == "Service")
    assert svc["spec"]["internalTrafficPolicy"] == "Local"
    assert svc["spec"]["selector"] == ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
    sm = next(d for d in mon if d["kind"] == "ServiceMonitor")
    assert sm["spec"]["selector"]["matchLabels"] == svc["metadata"]["labels"]
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    test = next(d for d in by_kind["Pod"] if d["metadata"]["name"] == "shmguard-monitor-test")
    assert f"--check=http://shmguard-monitor.{NS}.svc:9090" in test["spec"]["containers"][0]["args"]
    # Where agents run is set apart from the webhook's placement.
    docs, by_kind = objects(sets=["monitor.enabled=true", "monitor.mode=daemonset", "nodeSelector.role=system",
                                  "monitor.daemonset.nodeSelector.pool=gpu", "monitor.daemonset.tolerations=null"])
    spec = one(by_kind, "DaemonSet")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"pool": "gpu"} and "tolerations" not in spec
    # The Deployment mode is the default and keeps its Service as it was.
    docs, by_kind = objects(sets=["monitor.enabled=true"])
    assert "DaemonSet" not in by_kind
    svc = next(d for d in by_kind["Service"] if d["metadata"]["name"] == "shmguard-monitor")
    assert "internalTrafficPolicy" not in svc["spec"]
    assert "env" not in next(d for d in by_kind["Deployment"] if d["metadata"]["name"] == "shmguard-monitor")[
        "spec"]["template"]["spec"]["containers"][0]


def test_monitor_mode_is_checked():
    with pytest.raises(RenderError):
        objects(sets=["monitor.enabled=true", "monitor.mode=sidecar"])


def test_monitor_dashboard_is_a_configmap_grafana_picks_up():
    docs, _ = objects(sets=["monitor.enabled=true", "monitor.dashboard.enabled=true"])
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "shmguard-monitor-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(cm["data"]["shmguard-shm.json"])
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for metric in ("shmguard_shm_used_bytes", "shmguard_shm_size_bytes", "shmguard_shm_peak_bytes",
                   "shmguard_node_last_good_scrape_age_seconds"):
        assert metric in exprs
    assert "topk(20, shmguard_shm_used_bytes" in exprs  # the pods nearest their limit


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(not PROMTOOL, reason="promtool not built (hack/testbin.sh builds it)")
def test_monitor_alert_rules_fire_as_documented(tmp_path):
    docs, _ = objects(sets=["monitor.enabled=true", "monitor.prometheusRule.enabled=true"])
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "rules.yaml")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    pod = 'namespace="ml",pod="{p}",owner_kind="Job",owner_name="{p}"'
    gi = 1 << 30
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "30s", "tests": [{
        "interval": "30s",
        "input_series": [
            # full: 95% from the start; warm: 85%, never alerts; idle: 100Mi of 64Gi for its whole life.
            {"series": "shmguard_shm_used_bytes{" + pod.format(p="full") + "}", "values": f"{int(gi * 1.9)}x200"},
            {"series": "shmguard_shm_size_bytes{" + pod.format(p="full") + "}", "values": f"{2 * gi}x200"},
            {"series": "shmguard_shm_peak_bytes{" + pod.format(p="full") + "}", "values": f"{int(gi * 1.9)}x200"},
            {"series": "shmguard_shm_used_bytes{" + pod.format(p="warm") + "}", "values": f"{int(gi * 1.7)}x200"},
            {"series": "shmguard_shm_size_bytes{" + pod.format(p="warm") + "}", "values": f"{2 * gi}x200"},
            {"series": "shmguard_shm_peak_bytes{" + pod.format(p="warm") + "}", "values": f"{int(gi * 1.7)}x200"},
            {"series": "shmguard_shm_used_bytes{" + pod.format(p="idle") + "}", "values": f"{100 << 20}x200"},
            {"series": "shmguard_shm_size_bytes{" + pod.format(p="idle") + "}", "values": f"{64 * gi}x200"},
            {"series": "shmguard_shm_peak_bytes{" + pod.format(p="idle") + "}", "values": f"{100 << 20}x200"},
        ],
        "alert_rule_test": [
            {"eval_time": "1m", "alertname": "ShmguardShmNearlyFull", "exp_alerts": []},  # not yet 2m
            {"eval_time": "3m", "alertname": "ShmguardShmNearlyFull", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": "ml", "pod": "full", "owner_kind": "Job",
                               "owner_name": "full"},
                "exp_annotations": {
                    "summary": "/dev/shm of ml/full is 95% full",
                    "description": "A DataLoader that needs more shared memory dies with a bus error. Raise "
                                   "shmguard.io/size (or its batch-size/num-workers/sample-size) on Job/full; "
                                   "`shmguard top` suggests a size."}}]},
            {"eval_time": "30m", "alertname": "ShmguardShmOversized", "exp_alerts": []},
            {"eval_time": "90m", "alertname": "ShmguardShmOversized", "exp_alerts": [{
                "exp_labels": {"severity": "info", "namespace": "ml", "pod": "idle", "owner_kind": "Job",
                               "owner_name": "idle"},
                "exp_annotations": {
                    "summary": "/dev/shm of ml/idle never used 1/8 of its size",
                    "description": "Its peak so far is under 1/8 of the size; a smaller shmguard.io/size frees "
                                   "memory the pod's limit counts. `shmguard top` suggests one."}}]},
        ]}]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    r = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "tests.yaml")], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(not PROMTOOL, reason="promtool not built (hack/testbin.sh builds it)")
def test_unprotected_pods_alert_per_namespace_and_reason(tmp_path):
    webhook_rules_file(tmp_path)
    series = [
        # team-a: two pods admitted while the webhook failed open, for 20m; team-b: one, for 3m only.
        {"series": 'shmguard_unprotected_pods{namespace="team-a",reason="failed-open"}', "values": "2x20"},
        {"series": 'shmguard_unprotected_pods{namespace="team-b",reason="namespace-not-selected"}', "values": "1x3 _x20"},
    ]
    promtool_test(tmp_path, series, [
        {"eval_time": "3m", "alertname": "ShmguardPodsUnprotected", "exp_alerts": []},  # not yet 5m
        {"eval_time": "8m", "alertname": "ShmguardPodsUnprotected", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "namespace": "team-a", "reason": "failed-open"},
            "exp_annotations": {
                "summary": "2 training pods in team-a run without the /dev/shm shmguard would give them (failed-open)",
                "description": "They have the container runtime's 64 MiB /dev/shm (or their own, too small), and a "
                               "DataLoader in them can die of a bus error. before-install and failed-open: recreate "
                               "them; namespace-not-selected, object-not-selected: the webhook's selectors leave them "
                               "out; too-small: their own sizeLimit is below their hints. Each pod has a "
                               "ShmUnprotected Event, and `shmguard top` lists them with the reason."}}]},
        {"eval_time": "30m", "alertname": "ShmguardPodsUnprotected", "exp_alerts": []},
    ])


def webhook_rules_file(tmp_path):
    docs, by_kind = objects(sets=["monitor.enabled=true", "monitor.prometheusRule.enabled=true"])
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    hook = one(by_kind, "MutatingWebhookConfiguration")["webhooks"][0]["name"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return hook


def promtool_test(tmp_path, input_series, alert_rule_test):
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": input_series, "alert_rule_test": alert_rule_test}]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    r = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "tests.yaml")], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


FAILED_OPEN = {"summary": "The API server admitted pods without calling pods.shmguard.io (failurePolicy Ignore) in the last 10m",
               "description": "Those pods have the container runtime's 64 MiB /dev/shm, and a DataLoader in one of them "
                              "can die of a bus error. See why the API server could not call the webhook: its pods and "
                              f"Service endpoints (kubectl -n {NS} get pods,endpoints), its serving certificate, a "
                              "NetworkPolicy. `shmguard top` shows how full each pod's /dev/shm is."}


@pytest.mark.skipif(not PROMTOOL, reason="promtool not built (hack/testbin.sh builds it)")
def test_webhook_failed_open_fires_on_the_first_count_and_on_each_rise(tmp_path):
    """The API server creates apiserver_admission_webhook_fail_open_count at its first fail-open: the
    rule sees that series appear (increase() alone needs two samples and would miss it)."""
    hook = webhook_rules_file(tmp_path)
    assert hook == "pods.shmguard.io"
    ours = 'apiserver_admission_webhook_fail_open_count{name="pods.shmguard.io",type="admit",instance="a"}'
    other = 'apiserver_admission_webhook_fail_open_count{name="other.example.com",type="admit",instance="a"}'
    want = [{"exp_labels": {"severity": "warning", "name": hook}, "exp_annotations": FAILED_OPEN}]
    promtool_test(tmp_path, [
        {"series": ours, "values": "_x4 1x20 2x10"},  # absent, first fail-open at 5m, another at 26m
        {"series": other, "values": "0+1x40"},  # another webhook's fail-opens are not shmguard's
    ], [
        {"eval_time": "3m", "alertname": "ShmguardWebhookFailedOpen", "exp_alerts": []},
        {"eval_time": "6m", "alertname": "ShmguardWebhookFailedOpen", "exp_alerts": want},
        {"eval_time": "20m", "alertname": "ShmguardWebhookFailedOpen", "exp_alerts": []},  # 10m without one
        {"eval_time": "28m", "alertname": "ShmguardWebhookFailedOpen", "exp_alerts": want},
    ])


@pytest.mark.skipif(not PROMTOOL, reason="promtool not built (hack/testbin.sh builds it)")
def test_webhook_rejections_and_slow_calls_fire(tmp_path):
    hook = webhook_rules_file(tmp_path)
    rejected = ('apiserver_admission_webhook_rejection_count{name="pods.shmguard.io",type="admit",operation="CREATE",'
                'error_type="calling_webhook_error",rejection_code="500",instance="a"}')
    bucket = 'apiserver_admission_webhook_admission_duration_seconds_bucket{name="%s",type="admit",operation="CREATE",rejected="false",le="%s",instance="a"}'
    series = [{"series": rejected, "values": "_x2 3x40"}]
    # Ours: every call between 5 ms and 2.5 s (the 99th percentile 2.475 s); another webhook's all slow.
    for le, per_min in (("0.005", 0), ("2.5", 60), ("+Inf", 60)):
        series.append({"series": bucket % (hook, le), "values": f"0+{per_min}x40"})
    for le, per_min in (("0.005", 0), ("2.5", 0), ("+Inf", 60)):
        series.append({"series": bucket % ("other.example.com", le), "values": f"0+{per_min}x40"})
    promtool_test(tmp_path, series, [
        {"eval_time": "4m", "alertname": "ShmguardWebhookRejecting", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "name": hook, "error_type": "calling_webhook_error"},
            "exp_annotations": {
                "summary": "The API server refused pods at pods.shmguard.io in the last 10m (calling_webhook_error)",
                "description": "calling_webhook_error: the API server could not reach the webhook or had no answer "
                               "within timeoutSeconds, and failurePolicy Fail refused the pod; apiserver_internal_error: "
                               "the webhook's answer was not one the API server could apply; no_error: the webhook "
                               "denied the request."}}]},
        {"eval_time": "20m", "alertname": "ShmguardWebhookRejecting", "exp_alerts": []},
        {"eval_time": "8m", "alertname": "ShmguardWebhookSlow", "exp_alerts": []},  # pending for 10m
        {"eval_time": "20m", "alertname": "ShmguardWebhookSlow", "exp_alerts": [{
            "exp_labels": {"severity": "warning", "name": hook},
            "exp_annotations": {
                "summary": "99% of the API server's calls to pods.shmguard.io take up to 2.475s",
                "description": "shmguard answers in microseconds; a slow call is the network or TLS between the API "
                               "server and the webhook, and every pod creation waits for it (up to timeoutSeconds, 5s)."}}]},
    ])


@pytest.mark.skipif(not shutil.which("helm"), reason="helm not on PATH (hack/testbin.sh builds it)")
def test_kube_version_claims_only_what_the_tests_run_on():
    """Chart.yaml's kubeVersion is the oldest Kubernetes a test runs on (the cluster and node stages:
    hack/testbin.sh's KUBE_VERSION). testbin's helm assumes that minor without a cluster."""
    chart = yaml.safe_load((ROOT / "charts" / "shmguard" / "Chart.yaml").read_text())
    testbin = (ROOT / "hack" / "testbin.sh").read_text()
    kube = re.search(r"^KUBE_VERSION=v(\d+)\.(\d+)\.\d+", testbin, re.M)
    assert chart["kubeVersion"] == f">={kube.group(1)}.{kube.group(2)}.0-0", chart["kubeVersion"]
    helm = shutil.which("helm")
    base = [helm, "template", "shmguard", str(ROOT / "charts" / "shmguard"), "--namespace", "shmguard"]
    ok = subprocess.run(base + ["--kube-version", f"v{kube.group(1)}.{kube.group(2)}.0"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    older = f"v{kube.group(1)}.{int(kube.group(2)) - 1}.9"
    r = subprocess.run(base + ["--kube-version", older], capture_output=True, text=True)
    assert r.returncode != 0 and "incompatible with Kubernetes" in r.stderr, r.stderr
