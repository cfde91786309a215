#!/usr/bin/env bash
# Takes the host for the node in DIR/node (the host has room for one: lib.sh's CLAIM). A node that
# still runs is waited for (a concurrent test run goes down within minutes), up to
# SHMGUARD_NODE_WAIT seconds; what a node that is gone left behind (a killed test run, a lost
# session) is cleared first, by down.sh on its dir.
#   usage: hack/node/claim.sh DIR BINDIR   (up.sh's first step)
set -euo pipefail
dir=${1:?usage: claim.sh DIR BINDIR}
bindir=${2:-}
source "$(dirname "$0")/lib.sh"

deadline=$(($(date +%s) + ${SHMGUARD_NODE_WAIT:-900}))
said=""
exec 9>"$CLAIM.lock"
while :; do
  flock 9
  owner=$(claim_owner)
  if [[ -z "$owner" || "$owner" == "$NODE" ]]; then
    break
  elif ! node_alive "$owner"; then
    log "clearing what the node of $owner left on this host (its processes are gone)"
    "$here/down.sh" "${owner%/node}" "$bindir"
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
echo "$NODE" >"$CLAIM"
