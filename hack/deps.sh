#!/usr/bin/env bash
# Installs the Debian 12 packages shmguard needs to build, test, demo or benchmark.
# usage: hack/deps.sh [build|test|chart|demo|bench|fuzz|node]...   (installs only what is missing)
set -euo pipefail
build=(g++ cmake ninja-build ccache pkg-config libssl-dev nlohmann-json3-dev libyaml-dev libyaml-cpp-dev libcli11-dev libcpp-httplib-dev
       libgtest-dev libgmock-dev libbenchmark-dev openssl libtcmalloc-minimal4)
test=(python3 python3-pytest python3-jsonpatch python3-yaml python3-jsonschema python3-torch curl clang libclang-rt-14-dev util-linux)
chart=(python3 python3-yaml python3-jsonschema)
demo=(curl python3 python3-yaml python3-torch util-linux)
bench=(wrk python3-yaml valgrind)
fuzz=(clang libclang-rt-14-dev)
# A one-node cluster (hack/cluster.sh up --node): a second containerd with runc, CNI plugins, what
# kube-proxy and the kubelet call (iptables, conntrack, mount, ip), mmdebstrap for images, and socat
# (pods reach the API server on loopback through it).
node=(containerd runc containernetworking-plugins iptables conntrack iproute2 mount util-linux mmdebstrap socat)
want=("${build[@]}")
for group in "$@"; do
  case "$group" in
    build) ;;
    test) want+=("${test[@]}") ;;
    chart) want+=("${chart[@]}") ;;
    demo) want+=("${demo[@]}") ;;
    bench) want+=("${bench[@]}") ;;
    fuzz) want+=("${fuzz[@]}") ;;
    node) want+=("${node[@]}") ;;
    *) echo "hack/deps.sh: unknown group $group" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
