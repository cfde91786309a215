#!/usr/bin/env bash
# Builds, once, the real Kubernetes components the cluster tests run: kube-apiserver and kubectl
# (k8s.io/kubernetes through a wrapper module), etcd (go.etcd.io/etcd/server/v3 through a wrapper
# main) and helm (go install). Everything lands in a cache outside the repository; nothing built
# here is committed. Prints the directory holding the binaries on stdout, progress on stderr.
# usage: bindir=$(hack/testbin.sh)      SHMGUARD_TESTBIN_CACHE overrides ~/.cache/shmguard-testbin
set -euo pipefail

# The one place where the versions are pinned.
KUBE_VERSION=v1.31.14   # k8s.io/kubernetes; its ./staging modules are published as v0.31.14
HELM_VERSION=v3.16.4
TESTBIN_REVISION=2       # bump when a build recipe below changes
ETCD_VERSION=v3.5.17
KUSTOMIZE_VERSION=v5.5.0  # standalone: kubectl's embedded kustomize has no --enable-exec

export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
cache=${SHMGUARD_TESTBIN_CACHE:-$HOME/.cache/shmguard-testbin}
bindir="$cache/r$TESTBIN_REVISION-bin-kube-$KUBE_VERSION-helm-$HELM_VERSION-etcd-$ETCD_VERSION-kustomize-$KUSTOMIZE_VERSION"
mkdir -p "$bindir"
log() { echo "testbin: $*" >&2; }
command -v go >/dev/null || { log "go not found (expected at /usr/local/go/bin)"; exit 1; }

elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

build_helm() {
  [[ -x "$bindir/helm" ]] && return
  local t0; t0=$(date +%s)
  log "building helm $HELM_VERSION (go install, a cold build takes a few minutes)"
  # As Helm's Makefile does: the version, and the Kubernetes version `helm template` assumes
  # without a cluster (else it is v1.20 and charts with a kubeVersion constraint fail).
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local x="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  x+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
  x+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
  GOBIN="$cache/tmp-helm" go install -ldflags "-s -w $x" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$cache/tmp-helm/helm" "$bindir/helm"
  log "helm built in $(elapsed "$t0")"
}

build_kustomize() {
  [[ -x "$bindir/kustomize" ]] && return
  local t0; t0=$(date +%s)
  log "building kustomize $KUSTOMIZE_VERSION (go install)"
  GOBIN="$cache/tmp-kustomize" go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
  mv "$cache/tmp-kustomize/kustomize" "$bindir/kustomize"
  log "kustomize built in $(elapsed "$t0")"
}

# A module that requires k8s.io/kubernetes and points every ./staging replace line of its go.mod
# at the published v0.x release of the same minor version.
kube_module() {
  local dir=$1 staging=v0.${KUBE_VERSION#v1.}
  mkdir -p "$dir"
  local gomod; gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  {
    echo "module shmguard.test/kubebin"
    echo
    echo "go 1.22.0"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$gomod"
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
  (cd "$dir" && go mod tidy >&2)
}

build_kube() {
  [[ -x "$bindir/kube-apiserver" && -x "$bindir/kubectl" ]] && return
  local t0; t0=$(date +%s) dir="$cache/src-kube-$KUBE_VERSION"
  log "building kube-apiserver and kubectl $KUBE_VERSION (wrapper module; a cold build takes 10+ minutes)"
  kube_module "$dir"
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for cmd in kube-apiserver kubectl; do
    [[ -x "$bindir/$cmd" ]] && continue
    (cd "$dir" && go build -tags selinux,notest -ldflags "$flags" -o "$bindir/$cmd.tmp" \
      "k8s.io/kubernetes/cmd/$cmd" && mv "$bindir/$cmd.tmp" "$bindir/$cmd")
    log "$cmd built ($(elapsed "$t0") so far)"
  done
}

build_etcd() {
  [[ -x "$bindir/etcd" ]] && return
  local t0; t0=$(date +%s) dir="$cache/src-etcd-$ETCD_VERSION"
  log "building etcd $ETCD_VERSION (wrapper main around go.etcd.io/etcd/server/v3/etcdmain)"
  mkdir -p "$dir"
  printf 'module shmguard.test/etcdbin\n\ngo 1.22.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$ETCD_VERSION" >"$dir/go.mod"
  cat >"$dir/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  (cd "$dir" && go mod tidy >&2 && go build -ldflags "-s -w" -o "$bindir/etcd.tmp" . &&
    mv "$bindir/etcd.tmp" "$bindir/etcd")
  log "etcd built in $(elapsed "$t0")"
}

what=${1:-all}
case "$what" in
  all) build_etcd; build_helm; build_kustomize; build_kube ;;
  helm) build_helm ;;
  kustomize) build_kustomize ;;
  kube) build_kube ;;
  etcd) build_etcd ;;
  *) log "unknown component $what (all|helm|kustomize|kube|etcd)"; exit 2 ;;
esac
echo "$bindir"
