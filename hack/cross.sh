#!/usr/bin/env bash
# shmguard for linux/arm64 (NVIDIA Grace nodes: GH200, GB200), cross-built on this amd64 Debian 12
# host from Debian's packages: the cross toolchain (crossbuild-essential-arm64) and the multiarch
# :arm64 -dev packages, with cmake/toolchain-arm64.cmake. The arm64 test binaries run under
# qemu-user (qemu-user-static, registered with binfmt_misc so Docker can run arm64 images too).
# usage: hack/cross.sh deps            installs what the rest needs (as root; only what is missing)
#        hack/cross.sh build [DIR]     shmguard and its tests for arm64 into DIR (default build-arm64),
#                                      through ccache as hack/build.sh does
#        hack/cross.sh test [DIR]      the arm64 unit, golden, corpus and fuzz-regression tests under
#                                      qemu-aarch64; SHMGUARD_ARM64_TESTS=engine runs only the engine's
#                                      (sizing, config, inject, admission, manifests, golden) and the
#                                      monitor's
#        hack/cross.sh all [DIR]       deps, build, test (hack/test.sh runs this in the background)
#        hack/cross.sh image AMD64_TAG ARM64_TAG OUT [DIR]
#                                      the arm64 image around DIR/shmguard (hack/image.sh --platform),
#                                      run through qemu's binfmt handler beside the amd64 image
#                                      AMD64_TAG (same answers), then both as one OCI image index in
#                                      the oci-archive OUT (hack/image.sh --index)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "cross: $*" >&2; }
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
# libyaml-cpp-dev is not Multi-Arch: same in Debian 12 (its :arm64 and :amd64 cannot both be
# installed), so its arm64 .deb is unpacked here (headers, cmake files) and named to cmake instead;
# its cmake files are pointed at the library libyaml-cpp0.7:arm64 installed, so the binary's
# dependency is the installed library's (no RUNPATH into this directory).
overlay=${SHMGUARD_ARM64_OVERLAY:-$HOME/.cache/shmguard-arm64/yaml-cpp}

# qemu-aarch64 as the kernel's handler for aarch64 ELF files. The package ships the binfmt.d entry
# (flags OPF: the interpreter is opened now, so it also works inside containers), but nothing
# registers it without systemd: write it to binfmt_misc ourselves.
binfmt() {
  local conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  [[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] && return 0
  [[ -e /proc/sys/fs/binfmt_misc/register ]] || $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  grep -v '^#' "$conf" | $SUDO tee /proc/sys/fs/binfmt_misc/register >/dev/null
  log "registered qemu-aarch64 with binfmt_misc ($(grep ^flags /proc/sys/fs/binfmt_misc/qemu-aarch64))"
}

deps() {
  # The packages (hack/deps.sh's cross group): each exists for arm64 in Debian 12's main.
  "$root/hack/deps.sh" cross >&2
  local version p tmp
  version=$(dpkg-query -W -f='${Version}' libyaml-cpp0.7:arm64)
  if [[ "$(cat "$overlay/version" 2>/dev/null)" != "$version, pointed at the installed library" ]]; then
    log "unpacking libyaml-cpp-dev:arm64 $version into $overlay"
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -qq "libyaml-cpp-dev:arm64=$version" 2>/dev/null)
    rm -rf "$overlay"
    mkdir -p "$overlay"
    dpkg-deb -x "$tmp"/*.deb "$overlay"
    rm -rf "$tmp"
    sed -i 's#${_IMPORT_PREFIX}/lib/aarch64-linux-gnu/libyaml-cpp\.so#/usr/lib/aarch64-linux-gnu/libyaml-cpp.so#' \
      "$overlay"/usr/lib/aarch64-linux-gnu/cmake/yaml-cpp/yaml-cpp-targets-*.cmake
    grep -q '"/usr/lib/aarch64-linux-gnu/libyaml-cpp.so.0' "$overlay"/usr/lib/aarch64-linux-gnu/cmake/yaml-cpp/yaml-cpp-targets-*.cmake ||
      { log "libyaml-cpp-dev's cmake files changed shape"; return 1; }
    echo "$version, pointed at the installed library" >"$overlay/version"
  fi
  binfmt
}

# The engine's tests (what shmguard decides: sizing, config, recognition, the review, manifests and
# the golden files) and the monitor's; with SHMGUARD_ARM64_TESTS=all (the default) every other unit
# test, the corpus and the fuzz regressions too.
engine_tests=(quantity formula config recognize command procs inject annotation_row review json_reader
              yaml_read yaml_convert yaml_patch edit_plan yaml_emit templates offline observed surgical
              read_back rule_row golden)
monitor_tests=(shm_usage tracker protection pod_store)

build() {  # DIR
  # SHMGUARD_ARM64_TESTS=engine builds only the binary and the tests it runs.
  if [[ "${SHMGUARD_ARM64_TESTS:-all}" == engine ]]; then
    export SHMGUARD_TARGETS="shmguard ${engine_tests[*]/%/_test} ${monitor_tests[*]/%/_test}"
  fi
  # Tests are listed when they run (PRE_TEST), not by running each binary under qemu at build time.
  "$root/hack/build.sh" "$1" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-arm64.cmake" \
    -Dyaml-cpp_DIR="$overlay/usr/lib/aarch64-linux-gnu/cmake/yaml-cpp" \
    -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST -DSHMGUARD_BUILD_BENCH=OFF
  local arch
  arch=$(readelf -h "$1/shmguard" | awk -F: '/Machine:/ {gsub(/^ +/, "", $2); print $2}')
  [[ "$arch" == AArch64 ]] || { log "$1/shmguard is $arch, not AArch64"; return 1; }
  log "$1/shmguard: $(file -b "$1/shmguard" | cut -d, -f1-2)"
}

run_tests() {  # DIR
  local dir=$1 qemu t0 t failed=() names=() name
  qemu=$(command -v qemu-aarch64-static)
  # Test binaries, by the name tests/CMakeLists.txt gives them.
  if [[ "${SHMGUARD_ARM64_TESTS:-all}" == engine ]]; then
    names=("${engine_tests[@]/%/_test}" "${monitor_tests[@]/%/_test}")
  else
    for t in "$dir"/tests/*_test; do names+=("$(basename "$t")"); done
  fi
  for name in "${names[@]}"; do
    t0=$(date +%s%N)
    if "$qemu" "$dir/tests/$name" --gtest_brief=1 >"$dir/tests/$name.qemu.log" 2>&1; then
      printf 'cross: %-22s ok   %6.1fs\n' "$name" "$((($(date +%s%N) - t0) / 1000000))e-3" >&2
    else
      failed+=("$name")
      tail -n 30 "$dir/tests/$name.qemu.log" >&2
      printf 'cross: %-22s FAILED\n' "$name" >&2
    fi
  done
  if [[ "${SHMGUARD_ARM64_TESTS:-all}" != engine ]]; then
    # The fuzz regressions: ctest runs them through the toolchain's emulator with their inputs.
    (cd "$dir" && ctest -R '^fuzz_regressions\.' --output-on-failure -j "$(nproc)" --timeout 600 >&2) ||
      failed+=(fuzz_regressions)
  fi
  ((${#failed[@]} == 0)) || { log "failed under qemu-aarch64: ${failed[*]}"; return 1; }
  log "${#names[@]} arm64 test binaries passed under qemu-aarch64"
}

# What both images answer, each on its own platform: the arm64 one runs under qemu-aarch64.
answer() {  # PLATFORM TAG ARGS...: the command's stdout, then its stderr, then its exit status
  local platform=$1 tag=$2 err status=0; shift 2
  err=$(mktemp)
  docker run --rm -i --platform "$platform" "$tag" "$@" <"$root/examples/pytorchjob-resnet.yaml" 2>"$err" || status=$?
  echo "-- stderr:"; cat "$err"; rm -f "$err"
  echo "exit $status"
}

same_answers() {  # AMD64_TAG ARM64_TAG
  local args a b
  for args in "--version" "size --batch-size 64 --num-workers 8 --sample-size 588Ki --procs-per-pod 8 -o json" \
              "mutate -f -" "check -f -"; do
    # Output, errors and exit status (check exits 1 on its findings): all must match. stdout and
    # stderr are read apart: docker's attach interleaves the two streams as they arrive.
    a=$(answer linux/amd64 "$1" $args)
    b=$(answer linux/arm64 "$2" $args)
    if [[ "$a" != "$b" ]]; then
      log "amd64 and arm64 differ on: shmguard $args"
      diff <(echo "$a") <(echo "$b") >&2 || true
      return 1
    fi
    log "shmguard $args: the same on linux/amd64 and linux/arm64 (exit ${a##*exit }, $(echo "$a" | wc -c) bytes: $(echo "$a" | head -c 60 | tr '\n' ' ')...)"
  done
}

image() {  # AMD64_TAG ARM64_TAG OUT DIR
  local amd=${1:?} arm=${2:?} out=${3:?} dir=$4
  binfmt
  "$root/hack/image.sh" "$arm" --prebuilt "$dir/shmguard" --platform linux/arm64
  log "$arm: $(docker image inspect -f '{{.Os}}/{{.Architecture}}' "$arm"), $(($(docker image inspect -f '{{.Size}}' "$arm") / 1024 / 1024)) MiB"
  same_answers "$amd" "$arm"
  "$root/hack/image.sh" --index "$out" shmguard "$amd" "$arm" >&2
  skopeo inspect --raw "oci-archive:$out:shmguard" | python3 -c '
import json, sys
index = json.load(sys.stdin)
platforms = sorted(m["platform"]["os"] + "/" + m["platform"]["architecture"] for m in index["manifests"])
assert index["mediaType"] == "application/vnd.oci.image.index.v1+json", index["mediaType"]
assert platforms == ["linux/amd64", "linux/arm64"], platforms
print("cross: skopeo inspect --raw: an OCI image index over", " ".join(platforms), file=sys.stderr)'
}

cmd=${1:-all}
dir=${2:-$root/build-arm64}
case "$cmd" in
  image) image "${2:-}" "${3:-}" "${4:-}" "${5:-$root/build-arm64}" ;;
  deps) deps ;;
  build) build "$dir" ;;
  test) binfmt; run_tests "$dir" ;;
  all)
    deps
    SECONDS=0
    build "$dir"
    log "built in ${SECONDS}s"
    SECONDS=0
    run_tests "$dir"
    log "tests ran in ${SECONDS}s" ;;
  *) echo "usage: hack/cross.sh deps|build|test|all [DIR] | image AMD64_TAG ARM64_TAG OUT [DIR]" >&2; exit 2 ;;
esac
