#!/usr/bin/env bash
# Docker's images into the node's containerd (there is no registry here).
#   usage: hack/node/load.sh DIR IMAGE...
set -euo pipefail
dir=${1:?usage: load.sh DIR IMAGE...}
shift
bindir=""
source "$(dirname "$0")/lib.sh"

[[ -S "$SOCK" ]] || { log "no node runs in $dir (hack/cluster.sh up --node)"; exit 1; }
t0=$(date +%s)
for image in "$@"; do
  docker image inspect "$image" >/dev/null || { log "no image $image in Docker"; exit 1; }
done
# One stream for all of them: layers that several share (two tags of one image) go in once.
docker save "$@" | ctr -a "$SOCK" -n k8s.io images import --no-unpack - >/dev/null
log "loaded $* in $(($(date +%s) - t0))s"
