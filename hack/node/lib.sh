# The node's library, sourced by up.sh, down.sh, claim.sh and load.sh (each a step of
# `hack/cluster.sh up --node` / `down` / `load`): the node's fixed facts, its processes by PID file,
# its configs rendered from templates/, and the teardown of what it puts on the host.
# Before sourcing: `dir` (the cluster dir, holding the control plane's pki/ and kubeconfig) and
# `bindir` (the Kubernetes binaries; may be "" for a teardown).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
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
NODE=$dir/node
SOCK=$NODE/containerd/containerd.sock
PKI=$dir/pki
KUBECONFIG_FILE=$dir/kubeconfig

# The host has room for one node (one bridge, one set of KUBE-* chains, one kubepods cgroup). CLAIM
# names the node dir that holds it; /run is cleared at boot, and so is everything the claim covers.
CLAIM=/run/shmguard-node.owner
claim_owner() { [[ ! -f "$CLAIM" ]] || cat "$CLAIM"; }  # no claim file: no owner

# Kernel settings the kubelet (its kernel tunables) and kube-proxy (conntrack, localnet) may change:
# saved at `up`, put back at `down`.
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet net.netfilter.nf_conntrack_max
net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait
net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables"

# render TEMPLATE: templates/TEMPLATE with each ${NAME} replaced by the shell variable NAME; a name
# that is not set is an error (a config with a hole would start a component on defaults).
render() {
  local text name
  text=$(<"$here/templates/$1")
  while [[ $text =~ \$\{([A-Z_]+)\} ]]; do
    name=${BASH_REMATCH[1]}
    [[ -v $name ]] || { log "templates/$1: \${$name} is not set"; exit 1; }
    text=${text//"\${$name}"/"${!name}"}
  done
  printf '%s\n' "$text"
}

kubectl_node() { "$bindir/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

start() {  # NAME COMMAND...: runs COMMAND in the background, logs to NAME.log, PID in NAME.pid
  local name=$1
  shift
  "$@" >"$NODE/$name.log" 2>&1 &
  echo $! >"$NODE/$name.pid"
}

stop_pid() {  # NAME: TERM, then KILL after 10 s
  local f=$NODE/$1.pid pid
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  # The process may have exited already (a crash, a stop before): then there is nothing to kill.
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true  # as above: it may have exited after TERM
  rm -f "$f"
}

node_alive() {  # NODEDIR: does any process of the node in NODEDIR still run?
  local f
  for f in "$1"/*.pid; do
    [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null && return 0
  done
  return 1
}

pids_with_arg() {  # ARG: the processes one of whose arguments is exactly ARG
  local p
  for p in /proc/[0-9]*; do
    # A process may exit between the listing and the read: its cmdline is then gone.
    tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF -- "$1" && echo "${p#/proc/}"
  done
  return 0
}

crictl() {
  printf 'runtime-endpoint: unix://%s\ntimeout: 30\n' "$SOCK" >"$NODE/crictl.yaml"
  "$bindir/crictl" --config "$NODE/crictl.yaml" "$@"
}

# ---- teardown: what down.sh and claim.sh take off the host ----

restore_sysctls() {
  local line
  [[ -f "$NODE/sysctl.saved" ]] || return 0
  while IFS= read -r line; do
    local key=${line%%=*}
    # A key this kernel refuses to set back (read-only in a container) is left as it is.
    echo "${line#*=}" >"/proc/sys/${key//.//}" 2>/dev/null || true
  done <"$NODE/sysctl.saved"
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

# What one node's processes hold, all under its dir: the kubelet first, so it restarts nothing; then
# every pod sandbox through the CRI, which runs the CNI DEL (veth, netns, IP) and stops the
# containers; then the runtime itself and the mounts.
stop_processes() {
  # The training operators (hack/node/operators.sh) first: they would recreate what goes below.
  local op
  for op in "$NODE"/op-*.pid; do
    [[ -f "$op" ]] && stop_pid "$(basename "$op" .pid)"
  done
  # The cert dir their mount namespaces bound over (made on the host as the mount point).
  rmdir /tmp/k8s-webhook-server/serving-certs /tmp/k8s-webhook-server 2>/dev/null || true
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
    for m in $(awk -v d="$NODE/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r); do
      # Busy (a process still exits) or already gone with its parent: lazily, else the next round.
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
  awk -v d="$NODE" '$2 == d {print $2}' /proc/self/mounts | while read -r m; do umount -l "$m" || true; done  # raced
  # Container log links the kubelet keeps in the one fixed place it has for them.
  # The directory exists only once the kubelet has run a container.
  find /var/log/containers -maxdepth 1 -type l -lname "$NODE/*" -delete 2>/dev/null || true
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
