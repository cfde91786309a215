#!/usr/bin/env bash
# One real node beside hack/cluster.sh's control plane: a second containerd (its own root, state and
# socket; Docker's stays untouched) with runc and Debian's CNI plugins on a bridge of the project's
# own, the kubelet, kube-scheduler, kube-controller-manager, kube-proxy (iptables) and CoreDNS.
#   usage: hack/node/up.sh DIR BINDIR   (DIR holds the control plane's pki/ and kubeconfig)
# Called by `hack/cluster.sh up --node`, which runs down.sh when this fails.
# Every component listens on 127.0.0.1 but two that serve pods and the API server on the bridge's
# own address: CoreDNS, and the kubelet, which is reached there as in a real cluster (webhook
# authentication and authorization, anonymous off, a serving certificate from the cluster CA).
# Pods live on the bridge NODE_BRIDGE (NODE_POD_CIDR); no rule lets them reach any other network.
# Each process has a PID file under DIR/node; the configs are templates/ rendered into DIR/node.
set -euo pipefail
dir=${1:?usage: up.sh DIR BINDIR}
bindir=${2:?usage: up.sh DIR BINDIR}
source "$(dirname "$0")/lib.sh"

require() {
  (($(id -u) == 0)) || { log "needs root (containerd, the kubelet and kube-proxy manage mounts and iptables)"; exit 1; }
  local missing=() c
  for c in containerd runc iptables ip gcc docker socat; do command -v "$c" >/dev/null || missing+=("$c"); done
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  ((${#missing[@]} == 0)) || { log "missing: ${missing[*]} (hack/deps.sh node installs them)"; exit 1; }
  for c in kubelet kube-scheduler kube-controller-manager kube-proxy coredns crictl kubectl; do
    [[ -x "$bindir/$c" ]] || { log "$c not in $bindir (hack/testbin.sh builds it)"; exit 1; }
  done
}

save_sysctls() {
  local k
  for k in $SYSCTLS; do
    [[ -e "/proc/sys/${k//.//}" ]] && echo "$k=$(cat "/proc/sys/${k//.//}")"
  done >"$NODE/sysctl.saved"
}

network() {
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_GATEWAY/${NODE_POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # Docker sets the FORWARD policy to DROP; pod to pod (also through a Service) stays on the bridge.
  iptables -I FORWARD -i "$NODE_BRIDGE" -o "$NODE_BRIDGE" -m comment --comment shmguard-node -j ACCEPT
  mkdir -p "$NODE/cni" "$NODE/cni-ipam"
  render 10-shmguard.conflist >"$NODE/cni/10-shmguard.conflist"
}

containerd_up() {
  mkdir -p "$NODE/containerd"
  render containerd.toml >"$NODE/containerd/config.toml"
  start containerd containerd --config "$NODE/containerd/config.toml"
  wait_until 30 containerd "$NODE" ctr -a "$SOCK" version
}

pause_image() {
  local b=$NODE/pause-build
  mkdir -p "$b"
  gcc -static -O2 -o "$b/pause" "$here/pause.c"
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$b/Dockerfile"
  docker build -q -t "$PAUSE_IMAGE" "$b" >/dev/null 2>>"$NODE/pause-build.log"
  "$here/load.sh" "$dir" "$PAUSE_IMAGE" 2>/dev/null
}

dns_up() {
  local DNS_HEALTH_PORT DNS_READY_PORT
  DNS_HEALTH_PORT=$(free_port); DNS_READY_PORT=$(free_port)
  render Corefile >"$NODE/Corefile"
  start coredns "$bindir/coredns" -conf "$NODE/Corefile"
  echo "$DNS_READY_PORT" >"$NODE/coredns.ready-port"
}

# Pods reach the API server as in a real cluster, through the `kubernetes` Service (10.0.0.1:443):
# its EndpointSlice points at the node's bridge address, where a forwarder passes the connection to
# the API server on loopback (an endpoint may not be a loopback address, and the API server listens
# on loopback only). The chart's install check runs there. Same port number on both sides.
api_forward_up() {
  local API_PORT
  API_PORT=$(sed -n 's|.*server: https://127.0.0.1:\([0-9]*\).*|\1|p' "$KUBECONFIG_FILE")
  start api-forward socat "TCP-LISTEN:$API_PORT,bind=$NODE_GATEWAY,reuseaddr,fork" "TCP:127.0.0.1:$API_PORT"
  render kubernetes-endpointslice.yaml | kubectl_node apply -f - >/dev/null
}

# The kubelet's serving certificate, signed by the cluster CA for the node's name and address, so
# that the API server (--kubelet-certificate-authority) and the monitor verify it.
kubelet_cert() {
  render kubelet-serving.cnf >"$NODE/kubelet-serving.cnf"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$NODE/kubelet-serving.key" \
    -out "$NODE/kubelet-serving.csr" -subj "/CN=system:node:$NODE_NAME" 2>/dev/null
  openssl x509 -req -in "$NODE/kubelet-serving.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -out "$NODE/kubelet-serving.crt" -days 2 -extfile "$NODE/kubelet-serving.cnf" -extensions ext 2>/dev/null
  rm -f "$NODE/kubelet-serving.csr"
}

# As a real cluster's kubelet: on the node's address, a bearer token checked by TokenReview or a
# client certificate from the cluster CA, then a SubjectAccessReview (nodes/stats, nodes/proxy...).
kubelet_up() {
  local KUBELET_PORT KUBELET_HEALTHZ_PORT
  KUBELET_PORT=$(free_port); KUBELET_HEALTHZ_PORT=$(free_port)
  mkdir -p "$NODE/kubelet" "$NODE/pod-logs"
  : >"$NODE/resolv.conf"  # pods get cluster DNS only: no search domain or server of this host's
  kubelet_cert
  render apiserver-kubelet-rbac.yaml | kubectl_node apply -f - >/dev/null
  render kubelet.yaml >"$NODE/kubelet.yaml"
  start kubelet "$bindir/kubelet" --config "$NODE/kubelet.yaml" --kubeconfig "$KUBECONFIG_FILE" \
    --root-dir "$NODE/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_GATEWAY"
  echo "$KUBELET_HEALTHZ_PORT" >"$NODE/kubelet.healthz-port"
}

controllers_up() {
  start kube-controller-manager "$bindir/kube-controller-manager" --kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port "$(free_port)" --leader-elect=false \
    --controllers '*,-nodeipam' --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --use-service-account-credentials=false --cluster-cidr "$NODE_POD_CIDR" --allocate-node-cidrs=false
  start kube-scheduler "$bindir/kube-scheduler" --kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port "$(free_port)" --leader-elect=false
  local PROXY_HEALTHZ_PORT PROXY_METRICS_PORT
  PROXY_HEALTHZ_PORT=$(free_port); PROXY_METRICS_PORT=$(free_port)
  render kube-proxy.yaml >"$NODE/kube-proxy.yaml"
  start kube-proxy "$bindir/kube-proxy" --config "$NODE/kube-proxy.yaml"
}

node_ready() {
  kubectl_node get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints}' | grep -qx 'True '
}

require
t0=$(date +%s)
mkdir -p "$NODE"
"$here/claim.sh" "$dir" "$bindir"
save_sysctls
network
containerd_up
pause_image
dns_up
api_forward_up
kubelet_up
controllers_up
wait_until 120 "node $NODE_NAME Ready and untainted" "$NODE" node_ready
wait_until 30 "CoreDNS ready" "$NODE" curl -fsS "http://127.0.0.1:$(cat "$NODE/coredns.ready-port")/ready"
# The namespace controller gives every namespace its default ServiceAccount; pods need it.
wait_until 30 "the default ServiceAccount" "$NODE" kubectl_node get serviceaccount default
log "node $NODE_NAME Ready in $(($(date +%s) - t0))s (containerd $(containerd --version | awk '{print $3}'), pods on $NODE_BRIDGE $NODE_POD_CIDR)"
