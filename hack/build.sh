#!/usr/bin/env bash
# Configures and builds shmguard into BUILD_DIR (default build/). Extra args go to cmake.
# usage: hack/build.sh [BUILD_DIR] [cmake args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
cmake -S "$root" -B "$dir" -G Ninja "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
