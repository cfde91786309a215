#!/usr/bin/env bash
# Runs every test, installing what is missing (Debian 12, as root), in stages that say what runs
# and how long it took:
#   deps      Debian packages
#   testbin   the Kubernetes components, etcd, CoreDNS, crictl, helm, kustomize from Go modules (cached)
#   build     shmguard (RelWithDebInfo; through ccache)
#   tests     unit, golden, corpus and end-to-end suites (real helm/kustomize/kubectl when built)
#   image     the image: the Dockerfile's runtime stage around the binary the build stage made and
#             the tests stage tested (hack/image.sh --prebuilt)
#   cluster   the real kube-apiserver: webhook by URL, the chart installed, the image as webhook
#   operators waits for the training operators' build (Kubeflow Trainer with JobSet,
#             training-operator; `hack/testbin.sh operators`, started in the background beside
#             testbin) and passes their bin dir to the node stage (tests/node/test_operators.py);
#             SHMGUARD_OPERATORS=0 skips it (and test_operators.py)
#   node      a real node (hack/cluster.sh up --node): the chart, a training Job, a rollout under load
#   arm64     waits for the linux/arm64 build (`hack/cross.sh all`: cross-compiled with Debian's
#             cross toolchain and :arm64 packages, its tests run under qemu-aarch64; started in the
#             background beside the node stage, nice 19), then makes the arm64 image, checks it
#             answers as the amd64 one does, and writes both as one OCI image index
#             (build-arm64/shmguard.oci.tar); SHMGUARD_ARM64=0 skips it
#   tsan      the offline runner's threads under ThreadSanitizer
#   asan      the unit/golden/e2e suites again under AddressSanitizer + UBSan (leaks included)
# Without Go or Docker the stages that need them say so and are skipped.
# SHMGUARD_SKIP_SANITIZERS=1 skips the last stage; SHMGUARD_IMAGE_FROM_SOURCE=1 builds the image
# with the Dockerfile (a third compile, in debian:12) instead of around the build stage's binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=/usr/local/go/bin:$PATH
t_all=$(date +%s)
summary=()
stage() {  # NAME COMMAND...
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  echo "== stage $name: started $(date -u +%H:%M:%S)"
  "$@" || rc=$?
  summary+=("$(printf '%-8s %5ss  %s' "$name" "$(($(date +%s) - t0))" "$([[ $rc == 0 ]] && echo ok || echo "FAILED ($rc)")")")
  echo "== stage $name: $([[ $rc == 0 ]] && echo ok || echo "FAILED ($rc)") in $(($(date +%s) - t0))s"
  if [[ $rc != 0 ]]; then
    printf '%s\n' "${summary[@]}"
    exit "$rc"
  fi
}
skip() { summary+=("$(printf '%-8s     -   skipped: %s' "$1" "$2")"); echo "== stage $1: skipped: $2"; }

arm64_deps=()
[[ "${SHMGUARD_ARM64:-1}" != 0 ]] && arm64_deps=(cross)
stage deps "$root/hack/deps.sh" test chart node "${arm64_deps[@]}"

if command -v go >/dev/null; then
  # The training operators build in the background (nice, their own wrapper modules) beside the
  # kube binaries and the C++ build; the operators stage waits for them. SHMGUARD_OPERATORS=0 skips.
  if [[ "${SHMGUARD_OPERATORS:-1}" != 0 ]]; then
    ops_log=$(mktemp)
    (nice "$root/hack/testbin.sh" operators >"$ops_log.out" 2>"$ops_log"; echo $? >"$ops_log.rc") &
    ops_pid=$!
  fi
  testbin() { SHMGUARD_TESTBIN=$("$root/hack/testbin.sh"); export SHMGUARD_TESTBIN; }
  stage testbin testbin
  export PATH=$SHMGUARD_TESTBIN:$PATH  # helm, kubectl, kustomize for the e2e and chart suites
else
  skip testbin "go not found"
fi

stage build "$root/hack/build.sh" "$root/build"
run_ctest() { (cd "$1" && ctest --output-on-failure -j "$(nproc)" --timeout "$2"); }
stage tests run_ctest "$root/build" 600

docker_ok=0
docker info >/dev/null 2>&1 && docker_ok=1
if ((docker_ok)); then
  image() {
    if [[ "${SHMGUARD_IMAGE_FROM_SOURCE:-0}" == 1 ]]; then
      "$root/hack/image.sh" shmguard:test  # the Dockerfile: compiles and tests again in debian:12
    else
      "$root/hack/base-images.sh" debian:12  # the node stage's training image starts from it
      "$root/hack/image.sh" shmguard:test --prebuilt "$root/build/shmguard"
    fi
    echo "image shmguard:test: $(($(docker image inspect -f '{{.Size}}' shmguard:test) / 1024 / 1024)) MiB"
  }
  stage image image
  export SHMGUARD_IMAGE=shmguard:test
else
  skip image "no Docker Engine"
fi

# A pytest suite under tests/ against the build stage's binary.
suite() { SHMGUARD_BIN="$root/build/shmguard" SHMGUARD_SRC="$root" /usr/bin/python3 -m pytest -q -p no:cacheprovider -s --durations 8 "$root/tests/$1"; }

if [[ -n "${SHMGUARD_TESTBIN:-}" ]]; then
  stage cluster suite cluster
else
  skip cluster "no kube-apiserver (needs Go)"
fi

if [[ -n "${ops_pid:-}" ]]; then
  operators() {
    wait "$ops_pid" || true
    cat "$ops_log" >&2
    [[ "$(cat "$ops_log.rc")" == 0 ]] || return 1
    SHMGUARD_OPERATORS_BIN=$(cat "$ops_log.out"); export SHMGUARD_OPERATORS_BIN
    echo "operators in $SHMGUARD_OPERATORS_BIN"
  }
  stage operators operators
else
  skip operators "$( ((${SHMGUARD_OPERATORS:-1} == 0)) && echo "SHMGUARD_OPERATORS=0" || echo "go not found")"
fi

# The arm64 build in the background beside the node stage, which mostly waits on the kubelet and
# its pods: nice 19, so the node's own work comes first. The arm64 stage waits for it.
if [[ "${SHMGUARD_ARM64:-1}" != 0 ]]; then
  arm64_log=$(mktemp)
  (nice -n 19 "$root/hack/cross.sh" all "$root/build-arm64" >"$arm64_log" 2>&1; echo $? >"$arm64_log.rc") &
  arm64_pid=$!
fi

if [[ -n "${SHMGUARD_TESTBIN:-}" ]] && ((docker_ok)) && [[ $(id -u) == 0 ]]; then
  stage node suite node
else
  skip node "needs the kube binaries (Go), Docker for the images, and root for containerd and the kubelet"
fi

if [[ -n "${arm64_pid:-}" ]]; then
  arm64() {
    wait "$arm64_pid" || true
    cat "$arm64_log" >&2
    [[ "$(cat "$arm64_log.rc")" == 0 ]] || return 1
    if ((docker_ok)); then
      "$root/hack/cross.sh" image shmguard:test shmguard:test-arm64 "$root/build-arm64/shmguard.oci.tar" "$root/build-arm64"
    else
      echo "no Docker Engine: no arm64 image"
    fi
  }
  stage arm64 arm64
else
  skip arm64 "SHMGUARD_ARM64=0"
fi

if [[ "${SHMGUARD_SKIP_SANITIZERS:-0}" != 1 ]]; then
  # ThreadSanitizer over the offline runner's threads (mutate/check -j): its unit test runs one to
  # eight threads over streams of 600-700 documents; and over the server's workers, which share one
  # epoll set and hand connections between them (event_loop_test).
  tsan() {
    SHMGUARD_TARGETS="offline_test event_loop_test" "$root/hack/build.sh" "$root/build-tsan" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMGUARD_SANITIZE=thread -DSHMGUARD_BUILD_BENCH=OFF
    TSAN_OPTIONS=halt_on_error=1 "$root/build-tsan/tests/offline_test"
    TSAN_OPTIONS=halt_on_error=1 "$root/build-tsan/tests/event_loop_test"
  }
  stage tsan tsan
  asan() {
    "$root/hack/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DSHMGUARD_SANITIZE=address,undefined \
      -DSHMGUARD_BUILD_BENCH=OFF
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest "$root/build-asan" 900
  }
  stage asan asan
else
  skip asan "SHMGUARD_SKIP_SANITIZERS=1"
fi
echo "== all stages passed in $(($(date +%s) - t_all))s"
printf '%s\n' "${summary[@]}"
