#!/usr/bin/env bash
# Takes the node in DIR/node off the host: stops its processes by PID file, and every pod sandbox
# through the CRI (so the CNI plugin removes its veth and netns), unmounts what the kubelet mounted;
# then, when this node holds the host (lib.sh's CLAIM), removes the kube-proxy rules, the forward
# rule, the bridge, the kubepods cgroups and the CNI state it made and puts the sysctls back.
# tests/node/test_teardown.py checks that nothing is left.
#   usage: hack/node/down.sh DIR [BINDIR]   (BINDIR: crictl and kube-proxy --cleanup, when known)
set -euo pipefail
dir=${1:?usage: down.sh DIR [BINDIR]}
bindir=${2:-}
source "$(dirname "$0")/lib.sh"

[[ ! -d "$NODE" ]] || stop_processes
# The host's part only when this node holds it: a failed `up` that waited out another node must
# not take that node's bridge and rules away. A claim whose dir is gone is still this node's.
owner=$(claim_owner)
if [[ "$owner" == "$NODE" || (-z "$owner" && -d "$NODE") ]]; then
  clear_host
  rm -f "$CLAIM"
fi
rm -rf "$NODE"
