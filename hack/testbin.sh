#!/usr/bin/env bash
# Builds, once, the real Kubernetes components the cluster and node tests run: kube-apiserver,
# kubectl, kubelet, kube-scheduler, kube-controller-manager and kube-proxy (k8s.io/kubernetes through
# a wrapper module), etcd (go.etcd.io/etcd/server/v3 through a wrapper main), CoreDNS (a wrapper main
# with the few plugins cluster DNS needs), helm, kustomize and Prometheus's promtool (go install). Everything lands in a cache outside the repository; nothing built
# here is committed. Prints the directory holding the binaries on stdout, progress on stderr.
# usage: bindir=$(hack/testbin.sh)      SHMGUARD_TESTBIN_CACHE overrides ~/.cache/shmguard-testbin
#        opsdir=$(hack/testbin.sh operators)   the training operators (Kubeflow Trainer with JobSet,
#        training-operator) in a directory of their own, with `sources`: where their manifests are
set -euo pipefail

# The one place where the versions are pinned.
KUBE_VERSION=v1.37.2    # k8s.io/kubernetes; its ./staging modules are published as v0.37.2
HELM_VERSION=v3.16.4
TESTBIN_REVISION=4       # bump when a build recipe below changes
ETCD_VERSION=v3.5.17
KUSTOMIZE_VERSION=v5.5.0  # standalone: kubectl's embedded kustomize has no --enable-exec
COREDNS_VERSION=v1.11.4   # built against client-go v0.31, as the rest
CRICTL_VERSION=v1.34.0    # the CRI v1 client; the newest served here that containerd 1.6 answers
PROMETHEUS_VERSION=v0.316.0  # promtool (`test rules`, `check metrics`); added to the same bindir when missing
# The training operators the node runs with --operators (hack/node/operators.sh), cached apart from the
# rest: `hack/testbin.sh operators` builds them and prints their own directory.
TRAINER_VERSION=v2.0.0            # github.com/kubeflow/trainer/v2 (TrainJob, ClusterTrainingRuntime)
JOBSET_VERSION=v0.8.2             # sigs.k8s.io/jobset, the version Trainer's go.mod names
TRAINING_OPERATOR_VERSION=v1.8.1  # github.com/kubeflow/training-operator (PyTorchJob)
OPERATORS_REVISION=1              # bump when build_operators changes
# ./staging modules the module proxy here does not serve at the release's v0.x (a 403): each is pinned
# to the newest patch of the same minor that downloads (`go mod download -json k8s.io/NAME@v0.37.N`).
# At v1.37.2 every one is served.
STAGING_PINS=""
KUBE_COMMANDS="kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager kube-proxy"

export PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
cache=${SHMGUARD_TESTBIN_CACHE:-$HOME/.cache/shmguard-testbin}
bindir="$cache/r$TESTBIN_REVISION-bin-kube-$KUBE_VERSION-helm-$HELM_VERSION-etcd-$ETCD_VERSION-kustomize-$KUSTOMIZE_VERSION-coredns-$COREDNS_VERSION-crictl-$CRICTL_VERSION"
opsdir="$cache/r$OPERATORS_REVISION-operators-trainer-$TRAINER_VERSION-jobset-$JOBSET_VERSION-training-operator-$TRAINING_OPERATOR_VERSION"
mkdir -p "$bindir"
log() { echo "testbin: $*" >&2; }
command -v go >/dev/null || { log "go not found (expected at /usr/local/go/bin)"; exit 1; }

elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

# go_install NAME PACKAGE@VERSION [LDFLAGS]: `go install` into a GOBIN of its own, then into bindir.
go_install() {
  local name=$1 pkg=$2 flags=() t0
  t0=$(date +%s)
  [[ -n "${3:-}" ]] && flags=(-ldflags "$3")
  GOBIN="$cache/tmp-$name" go install "${flags[@]}" "$pkg"
  mv "$cache/tmp-$name/$name" "$bindir/$name"
  log "$name built in $(elapsed "$t0")"
}

# tools_go PACKAGE... >tools.go: a file importing the main packages a wrapper module builds, so
# that `go mod tidy` keeps what they need.
tools_go() {
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  printf '\t_ "%s"\n' "$@"
  printf ')\n'
}

# wrapper_main NAME MODULE VERSION <main.go: builds the main read from stdin in a module of its own
# that requires MODULE at VERSION (for commands whose own main module cannot be installed as is).
wrapper_main() {
  local name=$1 module=$2 version=$3 dir="$cache/src-$1-$3" t0
  t0=$(date +%s)
  mkdir -p "$dir"
  printf 'module shmguard.test/%sbin\n\ngo 1.22.0\n\nrequire %s %s\n' "$name" "$module" "$version" >"$dir/go.mod"
  cat >"$dir/main.go"
  (cd "$dir" && go mod tidy >&2 && go build -ldflags "-s -w" -o "$bindir/$name.tmp" . &&
    mv "$bindir/$name.tmp" "$bindir/$name")
  log "$name built in $(elapsed "$t0")"
}

# Kubeflow Trainer and JobSet in ONE wrapper module (Trainer requires JobSet at the version pinned
# here, so both compile against the same client libraries, once): `go install sigs.k8s.io/jobset@...`
# does not work here, the proxy answers JobSet's version list with a 403, but a module that requires
# it at a fixed version downloads it. training-operator v1.8.1 needs older Kubernetes libraries
# (v0.29) and gets a wrapper module of its own. Each wrapper imports the managers' main packages
# from a tools.go (as kube_module does) and `go build`s them.
#   ops_module DIR NAME "MODULE VERSION"... PACKAGE...
ops_module() {
  local dir=$1 name=$2 req=$3
  shift 3
  mkdir -p "$dir"
  { printf 'module shmguard.test/%s\n\ngo 1.24.0\n\nrequire (\n' "$name"
    printf '\t%s\n' "${req//;/$'\n\t'}"
    printf ')\n'; } >"$dir/go.mod"
  tools_go "$@" >"$dir/tools.go"
  rm -rf "$opsdir/tmp-$name" && mkdir -p "$opsdir/tmp-$name"
  (cd "$dir" && go mod tidy >&2 && go build -ldflags "-s -w" -o "$opsdir/tmp-$name/" "$@")
  mv "$opsdir/tmp-$name"/* "$opsdir/" && rmdir "$opsdir/tmp-$name"
}

build_operators() {
  local t0
  mkdir -p "$opsdir"
  if [[ ! -x "$opsdir/trainer-controller-manager" || ! -x "$opsdir/jobset" ]]; then
    t0=$(date +%s)
    log "building Kubeflow Trainer $TRAINER_VERSION and JobSet $JOBSET_VERSION (one wrapper module)"
    ops_module "$cache/src-trainer-$TRAINER_VERSION-jobset-$JOBSET_VERSION" trainerbin \
      "github.com/kubeflow/trainer/v2 $TRAINER_VERSION;sigs.k8s.io/jobset $JOBSET_VERSION" \
      github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager sigs.k8s.io/jobset
    log "trainer-controller-manager and jobset built in $(elapsed "$t0")"
  fi
  if [[ ! -x "$opsdir/training-operator.v1" ]]; then
    t0=$(date +%s)
    log "building Kubeflow training-operator $TRAINING_OPERATOR_VERSION (wrapper module)"
    ops_module "$cache/src-training-operator-$TRAINING_OPERATOR_VERSION" trainingoperatorbin \
      "github.com/kubeflow/training-operator $TRAINING_OPERATOR_VERSION" \
      github.com/kubeflow/training-operator/cmd/training-operator.v1
    log "training-operator.v1 built in $(elapsed "$t0")"
  fi
}

# The directories in the module cache that hold each operator's manifests (CRDs, RBAC, webhook
# configurations, runtimes), one "NAME DIR" a line: hack/node/operators.sh reads them from there.
operator_sources() {
  local m
  for m in "trainer github.com/kubeflow/trainer/v2@$TRAINER_VERSION" "jobset sigs.k8s.io/jobset@$JOBSET_VERSION" \
    "training-operator github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION"; do
    printf '%s %s\n' "${m%% *}" "$(go mod download -json "${m#* }" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  done >"$opsdir/sources"
}

build_helm() {
  [[ -x "$bindir/helm" ]] && return
  log "building helm $HELM_VERSION (go install, a cold build takes a few minutes)"
  # As Helm's Makefile does: the version, and the Kubernetes version `helm template` assumes
  # without a cluster (else it is v1.20 and charts with a kubeVersion constraint fail).
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local x="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  x+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
  x+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
  go_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "-s -w $x"
}

build_kustomize() {
  [[ -x "$bindir/kustomize" ]] && return
  log "building kustomize $KUSTOMIZE_VERSION (go install)"
  go_install kustomize "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
}

# A module that requires k8s.io/kubernetes and points every ./staging replace line of its go.mod
# at the published v0.x release of the same minor version, or at its pin in STAGING_PINS.
kube_module() {
  local dir=$1 staging=v0.${KUBE_VERSION#v1.} pin
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
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod" | while read -r mod; do
      pin=$staging
      for p in $STAGING_PINS; do [[ "k8s.io/${p%%=*}" == "$mod" ]] && pin=${p#*=}; done
      printf '\t%s => %s %s\n' "$mod" "$mod" "$pin"
    done
    echo ")"
  } >"$dir/go.mod"
  local cmd pkgs=()
  for cmd in $KUBE_COMMANDS; do pkgs+=("k8s.io/kubernetes/cmd/$cmd"); done
  tools_go "${pkgs[@]}" >"$dir/tools.go"
  (cd "$dir" && go mod tidy >&2)
}

build_kube() {
  local cmd missing=()
  for cmd in $KUBE_COMMANDS; do [[ -x "$bindir/$cmd" ]] || missing+=("$cmd"); done
  ((${#missing[@]})) || return 0
  local t0; t0=$(date +%s) dir="$cache/src-kube-$KUBE_VERSION"
  log "building ${missing[*]} $KUBE_VERSION (wrapper module; a cold build takes 15+ minutes)"
  kube_module "$dir"
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local flags="-s -w" pkgs=()
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for cmd in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$cmd"); done
  # One `go build` for all of them: the packages they share compile once, on every core.
  rm -rf "$bindir/tmp-kube" && mkdir -p "$bindir/tmp-kube"
  (cd "$dir" && go build -tags selinux,notest -ldflags "$flags" -o "$bindir/tmp-kube/" "${pkgs[@]}")
  mv "$bindir"/tmp-kube/* "$bindir/" && rmdir "$bindir/tmp-kube"
  log "${missing[*]} built in $(elapsed "$t0")"
}

# CoreDNS with only what cluster DNS needs: the kubernetes plugin answers for Services, and there is
# no forward plugin (a pod here has no upstream to reach). An out-of-tree main, as CoreDNS documents.
build_coredns() {
  [[ -x "$bindir/coredns" ]] && return
  log "building coredns $COREDNS_VERSION (wrapper main: bind, errors, health, ready, kubernetes)"
  wrapper_main coredns github.com/coredns/coredns "$COREDNS_VERSION" <<'EOF'
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() { dnsserver.Directives = []string{"bind", "errors", "health", "ready", "kubernetes"} }

func main() { coremain.Run() }
EOF
}

# crictl, which `hack/node/down.sh` uses to stop and remove pod sandboxes through the CRI (the
# runtime then runs the CNI DEL), also when the kubelet and the API server are already gone.
build_crictl() {
  [[ -x "$bindir/crictl" ]] && return
  log "building crictl $CRICTL_VERSION (go install)"
  go_install crictl "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" "-s -w"
}

build_promtool() {
  [[ -x "$bindir/promtool" ]] && return
  log "building promtool from prometheus $PROMETHEUS_VERSION (go install, a cold build takes several minutes)"
  go_install promtool "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" "-s -w"
}

build_etcd() {
  [[ -x "$bindir/etcd" ]] && return
  log "building etcd $ETCD_VERSION (wrapper main around go.etcd.io/etcd/server/v3/etcdmain)"
  wrapper_main etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
}

what=${1:-all}
case "$what" in
  all) build_etcd; build_helm; build_kustomize; build_kube; build_coredns; build_crictl; build_promtool ;;
  helm) build_helm ;;
  kustomize) build_kustomize ;;
  kube) build_kube ;;
  etcd) build_etcd ;;
  coredns) build_coredns ;;
  crictl) build_crictl ;;
  promtool) build_promtool ;;
  operators) build_operators; operator_sources; echo "$opsdir"; exit 0 ;;
  *) log "unknown component $what (all|helm|kustomize|kube|etcd|coredns|crictl|promtool|operators)"; exit 2 ;;
esac
echo "$bindir"
