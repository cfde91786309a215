#!/usr/bin/env bash
# The training operators users submit their jobs through, on the node (`hack/cluster.sh up --node
# --operators`): Kubeflow Trainer v2.0.0 with JobSet v0.8.2 (TrainJob -> JobSet -> Job -> Pod) and
# Kubeflow training-operator v1.8.1 (PyTorchJob -> Pod), built by `hack/testbin.sh operators`.
#   usage: hack/node/operators.sh up DIR BINDIR OPSDIR   (after hack/node/up.sh)
#          hack/node/operators.sh certs DIR NAME NAMESPACE SECRET   (internal: the kubelet's part)
# Their CRDs, RBAC, webhook configurations and Trainer's torch-distributed ClusterTrainingRuntime
# are read from the module cache (OPDIR/sources names the directories) through kustomize, as
# their own kustomizations put them together; none of their files is in this repository.
# Each manager runs as a host process beside the control plane, not in a pod (no image of theirs can
# be pulled here):
#   - with its own ServiceAccount's token, so it has the RBAC its manifests give it and no more;
#   - in a mount namespace of its own (`unshare -m`), where a directory of DIR/node/operators is
#     bound onto /tmp/k8s-webhook-server/serving-certs: each of the three writes and reads that
#     fixed path, and on one host they would share it;
#   - its admission webhooks and cert rotator on, as in their Deployments. The rotator fills the
#     webhook Secret and waits for the files in its cert dir, where the kubelet's secret volume
#     would put them: `certs` (a background loop per operator) writes them there.
#   - its webhook Service has no selector and an EndpointSlice to the node's bridge address, where
#     the manager listens (JobSet binds that address only; Trainer and training-operator take only
#     a port). The API server reaches it through the ClusterIP, as the chart's webhook.
# Probes on 127.0.0.1, metrics off. Processes: DIR/node/op-*.pid (down.sh stops them first).
set -euo pipefail
cmd=${1:?usage: operators.sh up DIR BINDIR OPSDIR}
dir=${2:?usage: operators.sh up DIR BINDIR OPSDIR}
bindir=${3:-}
source "$(dirname "$0")/lib.sh"
log() { echo "operators: $*" >&2; }
OPS=$NODE/operators
CERT_DIR=/tmp/k8s-webhook-server/serving-certs  # what all three hard-code

# certs NAME NAMESPACE SECRET: copies the webhook Secret's ca.crt, tls.crt and tls.key into the
# operator's cert dir whenever they change (the rotator writes them, and renews them).
certs() {
  local name=$1 ns=$2 secret=$3 out=$OPS/$1/certs data key
  bindir=$(cat "$dir/bindir")
  while :; do
    data=$(kubectl_node get secret -n "$ns" "$secret" \
      -o go-template='{{index .data "ca.crt"}} {{index .data "tls.crt"}} {{index .data "tls.key"}}' 2>/dev/null || true)
    read -r -a parts <<<"$data"
    # An empty Secret (the rotator has not written it yet) gives "<no value>" for each key.
    if ((${#parts[@]} == 3)) && [[ "$data" != *"<no value>"* ]]; then
      for key in 0:ca.crt 1:tls.crt 2:tls.key; do
        base64 -d <<<"${parts[${key%%:*}]}" >"$out/.${key#*:}.tmp" && mv "$out/.${key#*:}.tmp" "$out/${key#*:}"
      done
      sleep 10
    else
      sleep 0.3
    fi
  done
}

# kustomization NAME NAMESPACE [NAME_PREFIX] < RESOURCES: DIR/node/operators/NAME, whose resources
# are paths relative to it (kustomize takes no absolute ones) and its own files (written before).
kustomization() {
  local name=$1 ns=$2 prefix=${3:-} d=$OPS/$1 r
  {
    echo "namespace: $ns"
    [[ -z "$prefix" ]] || echo "namePrefix: $prefix"
    echo "resources:"
    while read -r r; do
      [[ -n "$r" ]] || continue
      [[ "$r" == /* ]] && r=$(realpath --relative-to="$d" "$r")
      echo "- $r"
    done
    # The Deployment's Service without its selector: its endpoints are the EndpointSlice below.
    echo "patches:"
    echo "- target: {kind: Service}"
    echo "  patch: '[{\"op\": \"remove\", \"path\": \"/spec/selector\"}]'"
  } >"$d/kustomization.yaml"
  "$bindir/kustomize" build --load-restrictor LoadRestrictionsNone "$d" 2>"$d/kustomize.log"
}

# endpoints NAMESPACE SERVICE PORT_NAME PORT: the Service's one endpoint, the manager on the host.
endpoints() {
  cat <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $2-host, namespace: $1, labels: {kubernetes.io/service-name: $2}}
addressType: IPv4
endpoints: [{addresses: [$NODE_GATEWAY], conditions: {ready: true}}]
ports: [{name: "$3", port: $4, protocol: TCP}]
EOF
}

# kubeconfig NAMESPACE SERVICEACCOUNT > FILE: the API server on loopback, as that ServiceAccount.
kubeconfig() {
  local server token
  server=$(sed -n 's|.*server: \(https://.*\)|\1|p' "$KUBECONFIG_FILE")
  token=$(kubectl_node create token "$2" -n "$1" --duration 48h)
  cat <<EOF
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "$server", certificate-authority: "$PKI/ca.crt"}}]
users: [{name: $2, user: {token: "$token"}}]
contexts: [{name: test, context: {cluster: test, user: $2, namespace: $1}}]
current-context: test
EOF
}

# manager NAME NAMESPACE SECRET COMMAND...: the manager in its own mount namespace, and its cert loop.
manager() {
  local name=$1 ns=$2 secret=$3
  shift 3
  mkdir -p "$OPS/$name/certs" "$CERT_DIR"
  start "op-$name" env KUBECONFIG="$OPS/$name/kubeconfig" unshare -m --propagation private -- \
    sh -c 'mount --bind "$0" /tmp/k8s-webhook-server/serving-certs && exec "$@"' "$OPS/$name/certs" "$@"
  start "op-certs-$name" "$here/operators.sh" certs "$dir" "$name" "$ns" "$secret"
}

up() {
  local opsdir=${1:?usage: operators.sh up DIR BINDIR OPSDIR} t0 src_trainer src_jobset src_to
  t0=$(date +%s)
  src() { awk -v n="$1" '$1 == n {print $2}' "$opsdir/sources"; }
  src_trainer=$(src trainer); src_jobset=$(src jobset); src_to=$(src training-operator)
  for d in "$src_trainer" "$src_jobset" "$src_to"; do
    [[ -n "$d" && -d "$d" ]] || { log "an operator's module is not in the module cache ($opsdir/sources)"; exit 1; }
  done
  mkdir -p "$OPS/trainer" "$OPS/jobset" "$OPS/training-operator"
  local ns
  for ns in kubeflow-system jobset-system kubeflow; do
    kubectl_node create namespace "$ns" --dry-run=client -o yaml | kubectl_node apply -f - >/dev/null
  done

  # Trainer's own Service and Secret stand in for base/manager (its Deployment and Service).
  printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: kubeflow-trainer-webhook-cert}\n' >"$OPS/trainer/secret.yaml"
  # (Its selector, as base/manager's, is removed with the others' by kustomization's patch.)
  printf 'apiVersion: v1\nkind: Service\nmetadata: {name: kubeflow-trainer-controller-manager}\nspec:\n  ports: [{name: webhook-server, port: 443, protocol: TCP, targetPort: 9443}]\n  selector: {app.kubernetes.io/component: manager}\n' >"$OPS/trainer/service.yaml"
  printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: training-operator-webhook-cert}\n' >"$OPS/training-operator/secret.yaml"
  {
    kustomization trainer kubeflow-system <<EOF
$src_trainer/manifests/base/crds
$src_trainer/manifests/base/rbac
$src_trainer/manifests/base/webhook
secret.yaml
service.yaml
EOF
    echo ---
    kustomization jobset jobset-system jobset- <<EOF
$src_jobset/config/components/crd
$src_jobset/config/components/rbac
$src_jobset/config/components/webhook
$src_jobset/config/components/internalcert
EOF
    echo ---
    kustomization training-operator kubeflow <<EOF
$src_to/manifests/base/crds
$src_to/manifests/base/rbac/role.yaml
$src_to/manifests/base/rbac/cluster-role-binding.yaml
$src_to/manifests/base/rbac/service-account.yaml
$src_to/manifests/base/webhook
$src_to/manifests/base/service.yaml
secret.yaml
EOF
  } >"$OPS/manifests.yaml"
  # Server-side: the CRDs are larger than client-side apply's last-applied annotation allows.
  kubectl_node apply --server-side --force-conflicts -f "$OPS/manifests.yaml" >"$OPS/apply.log"
  kubectl_node wait --for condition=established --timeout 60s \
    crd/trainjobs.trainer.kubeflow.org crd/clustertrainingruntimes.trainer.kubeflow.org \
    crd/trainingruntimes.trainer.kubeflow.org crd/jobsets.jobset.x-k8s.io crd/pytorchjobs.kubeflow.org >/dev/null

  local trainer_port jobset_port to_port trainer_probe jobset_probe to_probe
  trainer_port=$(free_port); jobset_port=$(free_port); to_port=$(free_port)
  trainer_probe=$(free_port); jobset_probe=$(free_port); to_probe=$(free_port)
  {
    endpoints kubeflow-system kubeflow-trainer-controller-manager webhook-server "$trainer_port"
    echo ---
    endpoints jobset-system jobset-webhook-service "" "$jobset_port"
    echo ---
    endpoints kubeflow training-operator webhook-server "$to_port"
  } | kubectl_node apply -f - >/dev/null
  kubeconfig kubeflow-system kubeflow-trainer-controller-manager >"$OPS/trainer/kubeconfig"
  kubeconfig jobset-system jobset-controller-manager >"$OPS/jobset/kubeconfig"
  kubeconfig kubeflow training-operator >"$OPS/training-operator/kubeconfig"

  cat >"$OPS/jobset/config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
webhook: {port: $jobset_port, host: $NODE_GATEWAY}
health: {healthProbeBindAddress: "127.0.0.1:$jobset_probe"}
metrics: {bindAddress: "0"}
internalCertManagement: {enable: true}
EOF
  # training-operator puts an init container on a Master+Worker job's workers that waits for the
  # master's name to resolve (alpine's nslookup by default): the same wait, in the training image.
  cat >"$OPS/training-operator/init-container.yaml" <<'EOF'
- name: init-pytorch
  image: {{.InitContainerImage}}
  imagePullPolicy: IfNotPresent
  resources:
    limits: {cpu: 100m, memory: 64Mi}
    requests: {cpu: 50m, memory: 10Mi}
  command: ['sh', '-c', 'for i in $(seq {{.MaxTries}}); do getent hosts {{.MasterAddr}} && exit 0; echo waiting for master; sleep 1; done; exit 1']
EOF
  manager trainer kubeflow-system kubeflow-trainer-webhook-cert "$opsdir/trainer-controller-manager" \
    --webhook-server-port "$trainer_port" --health-probe-bind-address "127.0.0.1:$trainer_probe" \
    --metrics-bind-address 0 --leader-elect=false
  manager jobset jobset-system jobset-webhook-server-cert "$opsdir/jobset" \
    --config "$OPS/jobset/config.yaml" --metrics-bind-address 0
  manager training-operator kubeflow training-operator-webhook-cert "$opsdir/training-operator.v1" \
    --webhook-server-port "$to_port" --health-probe-bind-address "127.0.0.1:$to_probe" \
    --metrics-bind-address 0 --leader-elect=false --enable-scheme pytorchjob \
    --pytorch-init-container-image "${SHMGUARD_TRAINING_IMAGE:-shmguard-training:test}" \
    --pytorch-init-container-template-file "$OPS/training-operator/init-container.yaml"

  # Ready: each manager's readyz (Trainer's waits for its certificates), and then its webhook
  # answering through the API server (the torch-distributed runtime passes Trainer's validator).
  wait_until 180 "Trainer ready" "$NODE" curl -fsS "http://127.0.0.1:$trainer_probe/readyz"
  wait_until 180 "JobSet ready" "$NODE" curl -fsS "http://127.0.0.1:$jobset_probe/readyz"
  wait_until 180 "training-operator ready" "$NODE" curl -fsS "http://127.0.0.1:$to_probe/readyz"
  wait_until 120 "Trainer's webhook (the torch-distributed ClusterTrainingRuntime)" "$NODE" \
    kubectl_node apply --server-side -f "$src_trainer/manifests/base/runtimes/torch_distributed.yaml"
  log "Trainer $(basename "$src_trainer" | sed 's/.*@//'), JobSet $(basename "$src_jobset" | sed 's/.*@//') and training-operator $(basename "$src_to" | sed 's/.*@//') ready in $(($(date +%s) - t0))s"
}

case "$cmd" in
  up) up "${4:-}" ;;
  certs) certs "$3" "$4" "$5" ;;
  *) echo "usage: operators.sh up DIR BINDIR OPSDIR" >&2; exit 2 ;;
esac
