#!/usr/bin/env bash
# One real node beside hack/cluster.sh's control plane: a second containerd (its own root, state and
# socket; Docker's stays untouched) with runc and Debian's CNI plugins on a bridge of the project's
# own, the kubelet, kube-scheduler, kube-controller-manager, kube-proxy (iptables) and CoreDNS.
# Called by `hack/cluster.sh up --node` / `down`; not meant to be run alone.
#   usage: hack/node/node.sh up|down DIR BINDIR     (DIR holds the control plane's pki/ and kubeconfig)
#          hack/node/node.sh load DIR IMAGE...      (Docker's images into the node's containerd)
# Every component listens on 127.0.0.1 but two that serve pods and the API server on the bridge's
# own address: CoreDNS, and the kubelet, which is reached there as in a real cluster (webhook
# authentication and authorization, anonymous off, a serving certificate from the cluster CA).
# Pods live on the bridge NODE_BRIDGE (NODE_POD_CIDR); no rule lets them reach any other network.
# Each process has a PID file under DIR/node and is stopped by PID; `down` also stops and removes
# every pod sandbox through the CRI (so the CNI plugin removes its veth and netns), unmounts what the
# kubelet mounted, and removes the kube-proxy rules, the forward rules, the bridge, the kubepods
# cgroups and the CNI state it made. tests/node/test_teardown.py checks that nothing is left.
# The host has room for one node: `up` waits for another that runs and clears what a dead one left.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
action=${1:?usage: node.sh up|down DIR BINDIR}
dir=${2:?cluster dir}
bindir=${3:-}
node=$dir/node
log() { echo "node: $*" >&2; }
source "$root/hack/lib.sh"

# The node's fixed facts. The bridge name and the /24 are the project's own; nothing else uses them.
# The node's InternalIP is the bridge's address: the API server proxies to it (it refuses a
# loopback node address) and pods reach the kubelet there, as metrics-server does.
NODE_NAME=shmguard-node
NODE_BRIDGE=shmguard0
NODE_POD_CIDR=10.213.0.0/24
NODE_GATEWAY=10.213.0.1
NODE_CNI_NETWORK=shmguard-node
PAUSE_IMAGE=shmguard.test/pause:1
SOCK=$node/containerd/containerd.sock

# Kernel settings the kubelet (its kernel tunables) and kube-proxy (conntrack, localnet) may change:
# saved at `up`, put back at `down`.
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet net.netfilter.nf_conntrack_max
net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait
net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables"

save_sysctls() {
  local k
  for k in $SYSCTLS; do
    [[ -e "/proc/sys/${k//.//}" ]] && echo "$k=$(cat "/proc/sys/${k//.//}")"
  done >"$node/sysctl.saved"
}

restore_sysctls() {
  local line
  [[ -f "$node/sysctl.saved" ]] || return 0
  while IFS= read -r line; do
    local key=${line%%=*}
    # A key this kernel refuses to set back (read-only in a container) is left as it is.
    echo "${line#*=}" >"/proc/sys/${key//.//}" 2>/dev/null || true
  done <"$node/sysctl.saved"
}

start() {  # NAME COMMAND...: runs COMMAND in the background, logs to NAME.log, PID in NAME.pid
  local name=$1
  shift
  "$@" >"$node/$name.log" 2>&1 &
  echo $! >"$node/$name.pid"
}

stop_pid() {  # NAME: TERM, then KILL after 10 s
  local f=$node/$1.pid pid
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  # The process may have exited already (a crash, a stop before): then there is nothing to kill.
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

require() {
  (($(id -u) == 0)) || { log "needs root (containerd, the kubelet and kube-proxy manage mounts and iptables)"; exit 1; }
  local missing=() c
  for c in containerd runc iptables ip gcc docker socat; do command -v "$c" >/dev/null || missing+=("$c"); done
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  ((${#missing[@]} == 0)) || { log "missing: ${missing[*]} (hack/deps.sh node installs them)"; exit 1; }
  for c in kubelet kube-scheduler kube-controller-manager kube-proxy coredns crictl; do
    [[ -x "$bindir/$c" ]] || { log "$c not in $bindir (hack/testbin.sh builds it)"; exit 1; }
  done
}

network() {
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_GATEWAY/${NODE_POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # Docker sets the FORWARD policy to DROP; pod to pod (also through a Service) stays on the bridge.
  iptables -I FORWARD -i "$NODE_BRIDGE" -o "$NODE_BRIDGE" -m comment --comment shmguard-node -j ACCEPT
  mkdir -p "$node/cni" "$node/cni-ipam"
  cat >"$node/cni/10-shmguard.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NODE_CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$node/cni-ipam",
        "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_GATEWAY"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

containerd_up() {
  mkdir -p "$node/containerd"
  cat >"$node/containerd/config.toml" <<EOF
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$node/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # This VM refuses a negative oom_score_adj; without this runc fails every sandbox.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni"
EOF
  start containerd containerd --config "$node/containerd/config.toml"
  wait_until 30 containerd "$node" ctr -a "$SOCK" version
}

pause_image() {
  local b=$node/pause-build
  mkdir -p "$b"
  gcc -static -O2 -o "$b/pause" "$here/pause.c"
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$b/Dockerfile"
  docker build -q -t "$PAUSE_IMAGE" "$b" >/dev/null 2>>"$node/pause-build.log"
  load "$PAUSE_IMAGE" 2>/dev/null
}

kubeconfig() { echo "$dir/kubeconfig"; }

dns_up() {
  local health ready
  health=$(free_port); ready=$(free_port)
  cat >"$node/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 {
    bind $NODE_GATEWAY
    errors
    health 127.0.0.1:$health
    ready 127.0.0.1:$ready
    kubernetes cluster.local in-addr.arpa {
        kubeconfig $(kubeconfig) test
        pods insecure
    }
}
EOF
  start coredns "$bindir/coredns" -conf "$node/Corefile"
  echo "$ready" >"$node/coredns.ready-port"
}

# Pods reach the API server as in a real cluster, through the `kubernetes` Service (10.0.0.1:443):
# its EndpointSlice points at the node's bridge address, where a forwarder passes the connection to
# the API server on loopback (an endpoint may not be a loopback address, and the API server listens
# on loopback only). The chart's install check runs there. Same port number on both sides.
api_forward_up() {
  local port
  port=$(sed -n 's|.*server: https://127.0.0.1:\([0-9]*\).*|\1|p' "$(kubeconfig)")
  start api-forward socat "TCP-LISTEN:$port,bind=$NODE_GATEWAY,reuseaddr,fork" "TCP:127.0.0.1:$port"
  "$bindir/kubectl" --kubeconfig "$(kubeconfig)" apply -f - >/dev/null <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes}
addressType: IPv4
endpoints: [{addresses: [$NODE_GATEWAY], conditions: {ready: true}}]
ports: [{name: https, port: $port, protocol: TCP}]
EOF
}

# The kubelet's serving certificate, signed by the cluster CA for the node's name and address, so
# that the API server (--kubelet-certificate-authority) and the monitor verify it.
kubelet_cert() {
  local p=$dir/pki
  printf '[ext]\nbasicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\nextendedKeyUsage = serverAuth\nsubjectAltName = IP:%s,DNS:%s\n' \
    "$NODE_GATEWAY" "$NODE_NAME" >"$node/kubelet-serving.cnf"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$node/kubelet-serving.key" \
    -out "$node/kubelet-serving.csr" -subj "/CN=system:node:$NODE_NAME" 2>/dev/null
  openssl x509 -req -in "$node/kubelet-serving.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
    -out "$node/kubelet-serving.crt" -days 2 -extfile "$node/kubelet-serving.cnf" -extensions ext 2>/dev/null
  rm -f "$node/kubelet-serving.csr"
}

# The API server's kubelet client certificate (hack/cluster.sh) gets what kubeadm gives it.
kubelet_api_rbac() {
  "$bindir/kubectl" --kubeconfig "$(kubeconfig)" apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: shmguard-test-apiserver-kubelet-client
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: shmguard-test-apiserver-kubelet-client}]
EOF
}

# As a real cluster's kubelet: on the node's address, a bearer token checked by TokenReview or a
# client certificate from the cluster CA, then a SubjectAccessReview (nodes/stats, nodes/proxy...).
kubelet_up() {
  local port healthz
  port=$(free_port); healthz=$(free_port)
  mkdir -p "$node/kubelet" "$node/pod-logs"
  : >"$node/resolv.conf"  # pods get cluster DNS only: no search domain or server of this host's
  kubelet_cert
  kubelet_api_rbac
  cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_GATEWAY
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz
tlsCertFile: $node/kubelet-serving.crt
tlsPrivateKeyFile: $node/kubelet-serving.key
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
failSwapOn: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true, cacheTTL: 10s}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 10s, cacheUnauthorizedTTL: 10s}
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
clusterDNS: [$NODE_GATEWAY]
clusterDomain: cluster.local
resolvConf: $node/resolv.conf
podLogsDir: $node/pod-logs
serializeImagePulls: false
EOF
  start kubelet "$bindir/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$(kubeconfig)" \
    --root-dir "$node/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_GATEWAY"
  echo "$healthz" >"$node/kubelet.healthz-port"
}

controllers_up() {
  local p=$dir/pki
  start kube-controller-manager "$bindir/kube-controller-manager" --kubeconfig "$(kubeconfig)" \
    --bind-address 127.0.0.1 --secure-port "$(free_port)" --leader-elect=false \
    --controllers '*,-nodeipam' --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
    --use-service-account-credentials=false --cluster-cidr "$NODE_POD_CIDR" --allocate-node-cidrs=false
  start kube-scheduler "$bindir/kube-scheduler" --kubeconfig "$(kubeconfig)" \
    --bind-address 127.0.0.1 --secure-port "$(free_port)" --leader-elect=false
  cat >"$node/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: $(kubeconfig)
hostnameOverride: $NODE_NAME
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$(free_port)
metricsBindAddress: 127.0.0.1:$(free_port)
clusterCIDR: $NODE_POD_CIDR
nodePortAddresses: [$NODE_GATEWAY/32]
conntrack:  # 0: leave this host's conntrack settings as they are
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
  start kube-proxy "$bindir/kube-proxy" --config "$node/kube-proxy.yaml"
}

node_ready() {
  "$bindir/kubectl" --kubeconfig "$(kubeconfig)" get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints}' | grep -qx 'True '
}

up() {
  require
  local t0; t0=$(date +%s)
  mkdir -p "$node"
  claim
  save_sysctls
  network
  containerd_up
  pause_image
  dns_up
  api_forward_up
  kubelet_up
  controllers_up
  wait_until 120 "node $NODE_NAME Ready and untainted" "$node" node_ready
  wait_until 30 "CoreDNS ready" "$node" curl -fsS "http://127.0.0.1:$(cat "$node/coredns.ready-port")/ready"
  # The namespace controller gives every namespace its default ServiceAccount; pods need it.
  wait_until 30 "the default ServiceAccount" "$node" "$bindir/kubectl" --kubeconfig "$(kubeconfig)" get serviceaccount default
  log "node $NODE_NAME Ready in $(($(date +%s) - t0))s (containerd $(containerd --version | awk '{print $3}'), pods on $NODE_BRIDGE $NODE_POD_CIDR)"
}

# The KUBE-* chains and the jumps to them: kube-proxy's (its --cleanup removes most) and the
# kubelet's own (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT), in IPv4 and IPv6. Only the
# node's components make KUBE-* chains on this host. The rules are deleted by giving iptables-save's
# own lines back to iptables-restore as deletions (-A -> -D): iptables-restore parses their quoting
# (a rule's comment) itself, so no line of the host's rules is ever evaluated by a shell.
drop_kube_chains() {
  local cmd table saved rules chains c
  for cmd in iptables ip6tables; do
    command -v "$cmd-restore" >/dev/null || continue  # no IPv6 tools: nothing of ours there either
    for table in filter nat mangle raw; do
      # A table this kernel does not have (raw, mangle without their modules) lists nothing.
      saved=$("$cmd-save" -t "$table" 2>/dev/null) || continue
      rules=$(sed -n 's/^-A \([A-Z]\+ .*-j KUBE-.*\)$/-D \1/p' <<<"$saved")
      chains=$(sed -n 's/^:\(KUBE-[A-Z0-9-]*\) .*/\1/p' <<<"$saved")
      [[ -n "$rules$chains" ]] || continue
      {
        echo "*$table"
        [[ -z "$rules" ]] || echo "$rules"
        for c in $chains; do echo "-F $c"; done
        for c in $chains; do echo "-X $c"; done
        echo COMMIT
      } | "$cmd-restore" --noflush || log "could not remove the KUBE-* rules of $cmd table $table"
    done
  done
}

pids_with_arg() {  # ARG: the processes one of whose arguments is exactly ARG
  local p
  for p in /proc/[0-9]*; do
    tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF -- "$1" && echo "${p#/proc/}"
  done
  return 0
}

crictl() {
  printf 'runtime-endpoint: unix://%s\ntimeout: 30\n' "$SOCK" >"$node/crictl.yaml"
  "$bindir/crictl" --config "$node/crictl.yaml" "$@"
}

# What one node's processes hold, all under its dir: the kubelet first, so it restarts nothing; then
# every pod sandbox through the CRI, which runs the CNI DEL (veth, netns, IP) and stops the
# containers; then the runtime itself and the mounts.
stop_processes() {
  stop_pid kubelet
  if [[ -S "$SOCK" ]] && [[ -n "$bindir" && -x "$bindir/crictl" ]]; then
    # -f stops each sandbox first; a sandbox whose shim is gone fails here and is killed below.
    crictl rmp -af >/dev/null 2>&1 || true
  fi
  for name in kube-proxy kube-scheduler kube-controller-manager coredns api-forward; do stop_pid "$name"; done
  if [[ -S "$SOCK" ]]; then  # a task the CRI did not reach: kill it so its shim exits
    local t
    for t in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$SOCK" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true  # it may exit meanwhile
    done
  fi
  stop_pid containerd
  # Shims of this node only: an argument exactly this node's socket (a pattern could match another's).
  local p
  for p in $(pids_with_arg "$SOCK"); do
    [[ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" == *containerd-shim-runc-v2* ]] && kill -KILL "$p" 2>/dev/null
  done
  # What the kubelet and the runtime mounted under the node's dir (emptyDirs, tokens, rootfs, its own
  # root dir bind mount), deepest first.
  local m
  for _ in 1 2 3; do
    for m in $(awk -v d="$node/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r); do
      # Busy (a process still exits) or already gone with its parent: lazily, else the next round.
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
  awk -v d="$node" '$2 == d {print $2}' /proc/self/mounts | while read -r m; do umount -l "$m" || true; done  # raced
  # Container log links the kubelet keeps in the one fixed place it has for them.
  # The directory exists only once the kubelet has run a container.
  find /var/log/containers -maxdepth 1 -type l -lname "$node/*" -delete 2>/dev/null || true
}

# What a node changes on the host itself, where there is room for one node only: the netns and CNI
# results the CRI left behind, kube-proxy's and the kubelet's iptables chains, the forward rule, the
# bridge, the kubepods cgroups, and the kernel settings (put back from the dir's saved copy).
clear_host() {
  local m f
  # Pods whose shims are gone (a node killed rather than brought down) keep running in the kubepods
  # cgroups, holding their netns and cgroups: they go first.
  for _ in $(seq 50); do
    f=$(find /sys/fs/cgroup -path '*kubepods*' -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
    [[ -n "$f" ]] || break
    kill -9 $f 2>/dev/null || true  # some exit between the listing and the kill
    sleep 0.2
  done
  # The CNI results the runtime did not delete (a killed node's pods): this network's, named
  # NETWORK-SANDBOX-IFNAME, and the loopback ones of the same sandboxes. (They do not name the netns.)
  for m in /var/lib/cni/results/"$NODE_CNI_NETWORK"-*; do
    [[ -e "$m" ]] || continue
    local id=${m#*/"$NODE_CNI_NETWORK"-}
    rm -f "$m" "/var/lib/cni/results/cni-loopback-${id%-*}-lo"
  done
  # The pods' netns whose veths are still on the bridge (the runtime that would remove them is gone).
  for m in $(ip -o link show master "$NODE_BRIDGE" 2>/dev/null | sed -n 's/.* link-netns \([^ ]*\).*/\1/p' | sort -u); do
    ip netns delete "$m" 2>/dev/null || true  # a netns the CNI plugin already removed
  done
  if [[ -n "$bindir" && -x "$bindir/kube-proxy" ]]; then
    # It reports rules it did not find (a node that never started kube-proxy) as failures.
    "$bindir/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  drop_kube_chains
  while iptables -D FORWARD -i "$NODE_BRIDGE" -o "$NODE_BRIDGE" -m comment --comment shmguard-node -j ACCEPT 2>/dev/null; do :; done
  ip link delete "$NODE_BRIDGE" 2>/dev/null || true  # a node that failed before making it
  restore_sysctls
  # The kubelet's cgroups (cgroupfs driver, cgroup v1 or v2), leaves first.
  local top
  for top in /sys/fs/cgroup/kubepods* /sys/fs/cgroup/*/kubepods; do
    # A cgroup that still holds a process is not empty: it stays, and the teardown test names it.
    [[ -d "$top" ]] && find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# The host has room for one node (one bridge, one set of KUBE-* chains, one kubepods cgroup). CLAIM
# names the node dir that holds it; /run is cleared at boot, and so is everything the claim covers.
CLAIM=/run/shmguard-node.owner
claim_owner() { cat "$CLAIM" 2>/dev/null || true; }  # no claim file: no owner

node_alive() {  # DIR: does any process of the node in DIR still run?
  local f
  for f in "$1"/*.pid; do
    [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null && return 0
  done
  return 1
}

# Takes the host for this node. A node that still runs is waited for (a concurrent test run goes
# down within minutes), up to SHMGUARD_NODE_WAIT seconds; what a node that is gone left behind (a
# killed test run, a lost session) is cleared first.
claim() {
  local deadline=$(($(date +%s) + ${SHMGUARD_NODE_WAIT:-900})) owner said=""
  exec 9>"$CLAIM.lock"
  while :; do
    flock 9
    owner=$(claim_owner)
    if [[ -z "$owner" || "$owner" == "$node" ]]; then
      break
    elif ! node_alive "$owner"; then
      log "clearing what the node of $owner left on this host (its processes are gone)"
      (node=$owner; SOCK=$node/containerd/containerd.sock; stop_processes; clear_host; rm -rf "$node")
      break
    fi
    flock -u 9
    if (($(date +%s) > deadline)); then
      log "the node of $owner still runs on this host; bring it down first: CLUSTER_DIR=${owner%/node} hack/cluster.sh down"
      exit 1
    fi
    [[ -n "$said" ]] || { log "waiting for the node of $owner to go down (one node per host)"; said=1; }
    sleep 2
  done
  # No claim, yet the bridge exists: a node of an older script, or made by hand. The same clearing.
  if [[ -z "$owner" ]] && ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    log "clearing a node's leftovers on this host (bridge $NODE_BRIDGE exists with no claim)"
    clear_host
  fi
  echo "$node" >"$CLAIM"
  flock -u 9
  exec 9>&-  # the daemons started next need no lock file open
}

down() {
  [[ -d "$node" ]] || return 0
  stop_processes
  # The host's part only when this node holds it: a failed `up` that waited out another node must
  # not take that node's bridge and rules away.
  local owner; owner=$(claim_owner)
  if [[ -z "$owner" || "$owner" == "$node" ]]; then
    clear_host
    rm -f "$CLAIM"
  fi
  rm -rf "$node"
}

load() {
  [[ -S "$SOCK" ]] || { log "no node runs in $dir (hack/cluster.sh up --node)"; exit 1; }
  local image t0
  t0=$(date +%s)
  for image in "$@"; do
    docker image inspect "$image" >/dev/null || { log "no image $image in Docker"; exit 1; }
  done
  # One stream for all of them: layers that several share (two tags of one image) go in once.
  docker save "$@" | ctr -a "$SOCK" -n k8s.io images import --no-unpack - >/dev/null
  log "loaded $* in $(($(date +%s) - t0))s"
}

case "$action" in
  up) up ;;
  down) down ;;
  load) shift 2; load "$@" ;;
  *) log "usage: node.sh up|down DIR BINDIR | load DIR IMAGE..."; exit 2 ;;
esac
