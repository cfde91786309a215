#!/usr/bin/env bash
# Configures and builds shmguard into BUILD_DIR (default build/). Extra args go to cmake.
# With ccache installed (hack/deps.sh installs it) compiles go through it, keyed on the sources
# relative to the checkout, so a fresh clone elsewhere (CI's) reuses what an earlier build compiled.
# usage: hack/build.sh [BUILD_DIR] [cmake args...]      SHMGUARD_CCACHE=0 turns ccache off;
#        SHMGUARD_TARGETS="a b" builds only those targets
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
launcher=()
if [[ "${SHMGUARD_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/shmguard-ccache} CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$dir" -G Ninja "${launcher[@]}" "$@" >/dev/null
targets=()
[[ -n "${SHMGUARD_TARGETS:-}" ]] && targets=(--target $SHMGUARD_TARGETS)
cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
