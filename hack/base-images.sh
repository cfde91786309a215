#!/usr/bin/env bash
# Makes the base images the Dockerfile names, debian:12 and debian:12-slim, from Debian's packages
# with mmdebstrap + `docker import`, for machines that have a Docker Engine but no registry to pull
# from. The mirror is read from this host's apt configuration at run time. Skips images that exist.
# usage: hack/base-images.sh [debian:12|debian:12-slim]...   (default both; FORCE=1 rebuilds)
set -euo pipefail
log() { echo "base-images: $*" >&2; }

wanted=("$@")
((${#wanted[@]})) || wanted=(debian:12 debian:12-slim)
want() { [[ " ${wanted[*]} " == *" $1 "* ]]; }
have() { docker image inspect "$1" >/dev/null 2>&1; }
missing=0
for image in "${wanted[@]}"; do have "$image" || missing=1; done
if [[ "${FORCE:-0}" != 1 ]] && ((missing == 0)); then
  log "${wanted[*]} exist"
  exit 0
fi
command -v mmdebstrap >/dev/null || {
  log "installing mmdebstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
}

# The host's Debian mirrors (deb822 .sources or one-line sources.list), as configured here.
mirrors() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    if [[ -f "$f" ]]; then awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' "$f"; fi
  done
  if [[ -f /etc/apt/sources.list ]]; then
    awk '$1 == "deb" && $2 !~ /^\[/ {print $2} $1 == "deb" && $2 ~ /^\[/ {print $3}' /etc/apt/sources.list
  fi
  return 0
}
main=$(mirrors | grep -v -- '-security' | head -n1)
security=$(mirrors | grep -- '-security' | head -n1 || true)
[[ -n "$main" ]] || { log "no Debian mirror found in /etc/apt"; exit 1; }
sources=("deb $main bookworm main" "deb $main bookworm-updates main")
[[ -n "$security" ]] && sources+=("deb $security bookworm-security main")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build() {  # NAME [mmdebstrap options...]
  local name=$1 t0
  shift
  t0=$(date +%s)
  log "making $name from ${main} (minbase bookworm)"
  printf '%s\n' "${sources[@]}" | mmdebstrap --quiet --variant=minbase --format=tar "$@" bookworm \
    "$work/rootfs.tar" - >&2
  docker import --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$work/rootfs.tar" "$name" >/dev/null
  rm -f "$work/rootfs.tar"
  log "$name ready in $(($(date +%s) - t0))s ($(docker image inspect -f '{{.Size}}' "$name") bytes)"
}
# As Docker's debian images do: apt keeps no package cache; slim also drops docs, man pages, locales.
common=(--aptopt='Binary::apt::APT::Keep-Downloaded-Packages "false";'
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin')
if want debian:12 && { [[ "${FORCE:-0}" == 1 ]] || ! have debian:12; }; then
  build debian:12 "${common[@]}"
fi
want debian:12-slim && { [[ "${FORCE:-0}" == 1 ]] || ! have debian:12-slim; } || exit 0
build debian:12-slim "${common[@]}" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*'
