#!/usr/bin/env bash
# Installs the Debian 12 packages shmguard needs to build, test, demo or benchmark.
# usage: hack/deps.sh [build|test|chart|demo|bench|fuzz|node|cross]...   (installs only what is missing)
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
# The linux/arm64 build (hack/cross.sh): the cross toolchain, qemu-user (binfmt), skopeo for the
# multi-arch OCI archive, and the :arm64 twins of the build's libraries (dpkg's arm64 architecture
# is added for them). nlohmann-json3-dev and libcli11-dev are arch-all: the build group's serve.
# libyaml-cpp-dev is not Multi-Arch: same, so hack/cross.sh unpacks its arm64 .deb by itself.
cross=(crossbuild-essential-arm64 qemu-user-static skopeo file libssl-dev:arm64 libyaml-dev:arm64
       libyaml-cpp0.7:arm64 libcpp-httplib-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64
       libtcmalloc-minimal4:arm64)
want=("${build[@]}")
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
for group in "$@"; do
  case "$group" in
    build) ;;
    test) want+=("${test[@]}") ;;
    chart) want+=("${chart[@]}") ;;
    demo) want+=("${demo[@]}") ;;
    bench) want+=("${bench[@]}") ;;
    fuzz) want+=("${fuzz[@]}") ;;
    node) want+=("${node[@]}") ;;
    cross)
      want+=("${cross[@]}")
      if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        echo "adding dpkg's arm64 architecture"
        $SUDO dpkg --add-architecture arm64
      fi ;;
    *) echo "hack/deps.sh: unknown group $group" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
