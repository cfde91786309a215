#!/usr/bin/env bash
# Runs every test: installs what is missing (Debian 12, as root), builds, runs the unit, golden,
# corpus and end-to-end suites, then the whole suite again under AddressSanitizer + UBSan
# (leaks included). SHMGUARD_SKIP_SANITIZERS=1 skips the second pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/hack/deps.sh" test
echo "== build (RelWithDebInfo)"
"$root/hack/build.sh" "$root/build"
echo "== tests"
(cd "$root/build" && ctest --output-on-failure -j "$(nproc)" --timeout 600)
if [[ "${SHMGUARD_SKIP_SANITIZERS:-0}" != 1 ]]; then
  echo "== build (AddressSanitizer + UndefinedBehaviorSanitizer)"
  "$root/hack/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DSHMGUARD_SANITIZE=address,undefined \
    -DSHMGUARD_BUILD_BENCH=OFF
  echo "== tests under sanitizers"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  (cd "$root/build-asan" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
fi
