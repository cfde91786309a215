#!/usr/bin/env bash
# A real control plane for the cluster tests: etcd and kube-apiserver (built by hack/testbin.sh)
# on loopback with generated certificates, RBAC and a kubeconfig for an admin.
#   Without --node: no controller-manager (so ServiceAccount admission is off) and aggregator routing
#   on (webhook Services resolve to their Endpoints, which the tests write themselves, playing the
#   kubelet's part).
#   With --node: also one real node (hack/node/up.sh): containerd, the kubelet, kube-scheduler,
#   kube-controller-manager, kube-proxy and CoreDNS. The API server reaches webhooks through their
#   Service's ClusterIP, as in any cluster, and pods run for real.
#   With --node --operators: also the training operators on that node (hack/node/operators.sh):
#   Kubeflow Trainer v2.0.0 with JobSet v0.8.2 and Kubeflow training-operator v1.8.1, with their CRDs,
#   webhooks and Trainer's torch-distributed runtime (built by `hack/testbin.sh operators`).
# usage: hack/cluster.sh up [--node [--operators]]|down|env      CLUSTER_DIR (default /tmp/shmguard-cluster)
#   up   starts it and waits for /readyz (and the node Ready); prints `export KUBECONFIG=...` on
#        stdout, so `eval "$(hack/cluster.sh up --node)"` sets up the shell
#   env  prints the exports of a running cluster;  down  stops it and removes CLUSTER_DIR
#   load IMAGE...  puts Docker's images into the node's containerd (as `kind load docker-image`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-/tmp/shmguard-cluster}
log() { echo "cluster: $*" >&2; }
source "$root/hack/lib.sh"

certs() {
  local c=$dir/pki
  mkdir -p "$c"
  cd "$c"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt \
    -days 2 -subj "/CN=shmguard-test-cluster-ca" 2>/dev/null
  cat >apiserver.cnf <<'CNF'
[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
CNF
  printf '[ext]\nbasicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\nextendedKeyUsage = clientAuth\n' >client.cnf
  sign() {  # NAME SUBJECT EXTFILE
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.csr" \
      -subj "$2" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 \
      -extfile "$3" -extensions ext 2>/dev/null
    rm -f "$1.csr"
  }
  sign apiserver "/CN=kube-apiserver" apiserver.cnf
  sign admin "/O=system:masters/CN=shmguard-test-admin" client.cnf
  # The API server's client certificate at the kubelet (logs, exec, the node proxy): no group; the
  # node's RBAC binds it to system:kubelet-api-admin, as kubeadm does.
  sign kubelet-client "/CN=shmguard-test-apiserver-kubelet-client" client.cnf
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  cd - >/dev/null
}

wait_for() {  # URL SECONDS CURL-ARGS...
  local url=$1 seconds=$2
  shift 2
  wait_until "$seconds" "$url" "$dir" curl -fsS "$@" "$url"
}

print_env() {
  local ops=""
  [[ -f "$dir/opsdir" ]] && ops=" SHMGUARD_OPERATORS_BIN=$(cat "$dir/opsdir")"
  echo "export KUBECONFIG=$dir/kubeconfig SHMGUARD_TESTBIN=$(cat "$dir/bindir")$ops PATH=$(cat "$dir/bindir"):\$PATH"
}

up() {
  local with_node=${1:-} with_ops=${2:-}
  if [[ -f "$dir/apiserver.pid" ]] && kill -0 "$(cat "$dir/apiserver.pid")" 2>/dev/null; then
    if [[ -n "$with_node" && ! -d "$dir/node" ]]; then
      log "a cluster without a node runs in $dir: hack/cluster.sh down first"
      return 1
    fi
    print_env
    return
  fi
  local t0 bindir; t0=$(date +%s)
  bindir=$("$root/hack/testbin.sh")
  [[ -d "$dir/node" ]] && "$root/hack/node/down.sh" "$dir" "$bindir"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$bindir" >"$dir/bindir"
  certs
  local etcd_port peer_port api_port
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  "$bindir/etcd" --name shmguard-test --data-dir "$dir/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "shmguard-test=http://127.0.0.1:$peer_port" --log-level warn \
    >"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"
  wait_for "http://127.0.0.1:$etcd_port/health" 30
  local p=$dir/pki node_flags=(--disable-admission-plugins ServiceAccount --enable-aggregator-routing=true)
  # With a node the kubelet is reached at its InternalIP (the node's bridge address) with a client
  # certificate, its serving certificate verified against the cluster CA; Services by their ClusterIP.
  [[ -n "$with_node" ]] && node_flags=(--kubelet-preferred-address-types InternalIP --enable-aggregator-routing=false
    --kubelet-client-certificate "$p/kubelet-client.crt" --kubelet-client-key "$p/kubelet-client.key"
    --kubelet-certificate-authority "$p/ca.crt")
  "$bindir/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --endpoint-reconciler-type none \
    --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
    --client-ca-file "$p/ca.crt" \
    --authorization-mode RBAC \
    --service-cluster-ip-range 10.0.0.0/24 \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
    "${node_flags[@]}" \
    --allow-privileged=true \
    >"$dir/apiserver.log" 2>&1 &
  echo $! >"$dir/apiserver.pid"
  wait_for "https://127.0.0.1:$api_port/readyz" 90 --cacert "$p/ca.crt" --cert "$p/admin.crt" --key "$p/admin.key"
  # It holds the path to an admin key: only its owner reads it (helm warns otherwise).
  (umask 077 && : >"$dir/kubeconfig")
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $p/ca.crt
users:
- name: admin
  user:
    client-certificate: $p/admin.crt
    client-key: $p/admin.key
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
EOF
  # No controller-manager: namespaces need no finalizing and "default" must exist for kubectl.
  KUBECONFIG=$dir/kubeconfig "$bindir/kubectl" get namespace default >/dev/null 2>&1 ||
    KUBECONFIG=$dir/kubeconfig "$bindir/kubectl" create namespace default >/dev/null
  log "etcd and kube-apiserver $("$bindir/kube-apiserver" --version | awk '{print $2}') ready on 127.0.0.1:$api_port in $(($(date +%s) - t0))s"
  if [[ -n "$with_node" ]]; then
    "$root/hack/node/up.sh" "$dir" "$bindir" || { down; return 1; }
  fi
  if [[ -n "$with_ops" ]]; then
    local opsdir
    opsdir=${SHMGUARD_OPERATORS_BIN:-$("$root/hack/testbin.sh" operators)}
    echo "$opsdir" >"$dir/opsdir"
    "$root/hack/node/operators.sh" up "$dir" "$bindir" "$opsdir" || { down; return 1; }
  fi
  print_env
}

down() {
  local f
  # The node first, by its PIDs and the CRI: it needs no API server to go.
  if [[ -d "$dir/node" ]]; then
    "$root/hack/node/down.sh" "$dir" "$(cat "$dir/bindir" 2>/dev/null || true)"
  fi
  for f in apiserver etcd; do
    if [[ -f "$dir/$f.pid" ]]; then
      kill "$(cat "$dir/$f.pid")" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$(cat "$dir/$f.pid")" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$(cat "$dir/$f.pid")" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
  log "down"
}

case "${1:-}" in
  up)
    case "${2:-}" in
      "") up ;;
      --node)
        case "${3:-}" in
          "") up node ;;
          --operators) up node operators ;;
          *) echo "usage: hack/cluster.sh up [--node [--operators]]|down|env" >&2; exit 2 ;;
        esac ;;
      *) echo "usage: hack/cluster.sh up [--node [--operators]]|down|env" >&2; exit 2 ;;
    esac ;;
  down) down ;;
  env) print_env ;;
  load) shift; "$root/hack/node/load.sh" "$dir" "$@" ;;
  *) echo "usage: hack/cluster.sh up [--node [--operators]]|down|env|load IMAGE..." >&2; exit 2 ;;
esac
