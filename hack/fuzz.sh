#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (+ASan/UBSan) and runs each for SECONDS (default 600),
# JOBS at a time (default: one per core). Seeds come from the test data; a crashing input is
# copied to tests/fuzz/regressions/<target>/ so the test suite replays it from then on.
# usage: hack/fuzz.sh [SECONDS] [target...]     targets: admission quantity manifests config http summary
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-600}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(admission quantity manifests config http summary)
jobs=${JOBS:-$(nproc)}
"$root/hack/deps.sh" fuzz
dir="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSHMGUARD_BUILD_FUZZ=ON -DSHMGUARD_SANITIZE=address,undefined -DSHMGUARD_BUILD_TESTS=OFF \
  -DSHMGUARD_BUILD_BENCH=OFF -DSHMGUARD_TCMALLOC=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}")

seed() {  # $1 target, $2 corpus dir
  mkdir -p "$2"
  cp -r "$root/tests/fuzz/regressions/$1/." "$2/" 2>/dev/null || true
  case "$1" in
    admission)
      cp "$root/hack/bench/review.json" "$2/"
      for f in "$root"/tests/golden/*.yaml; do
        [[ $f == *.golden.yaml || $f == *.config.yaml ]] && continue
        python3 -c 'import json,sys,yaml; pod=yaml.safe_load(open(sys.argv[1])); print(json.dumps({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"ns","object":pod}}))' "$f" >"$2/$(basename "$f").json"
      done ;;
    manifests) cp "$root"/tests/golden/*.yaml "$root"/examples/*.yaml "$2/"
      [[ -d "$root/../shared/corpus" ]] && find "$root/../shared/corpus" -type f ! -name '*.md' -exec cp {} "$2/" \; ;;
    config) cp "$root"/tests/golden/*.config.yaml "$2/" ;;
    quantity) printf '1536Mi' >"$2/a"; printf '1.5G' >"$2/b"; printf '500m' >"$2/c" ;;
    http) printf 'GET /healthz HTTP/1.0\r\n\r\n' >"$2/get" ;;
  esac
}

run_one() {
  local t=$1 corpus="$dir/corpus-$1" artifacts="$dir/artifacts-$1"
  seed "$t" "$corpus"
  mkdir -p "$artifacts"
  local dict=()
  [[ $t == admission ]] && dict=(-dict="$root/tests/fuzz/json.dict")
  [[ $t == manifests || $t == config ]] && dict=(-dict="$root/tests/fuzz/yaml.dict")
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1 \
    "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "${dict[@]}" "$corpus" >"$dir/fuzz-$t.log" 2>&1
  local code=$?
  set -e
  local execs
  execs=$(grep -a "stat::number_of_executed_units" "$dir/fuzz-$t.log" | awk "{print \$2}" || true)
  local found
  found=$(find "$artifacts" -type f | wc -l)
  if ((found)); then
    mkdir -p "$root/tests/fuzz/regressions/$t"
    cp "$artifacts"/* "$root/tests/fuzz/regressions/$t/"
  fi
  echo "fuzz_$t: ${execs:-?} executions in ${secs}s, exit $code, $found crashing input(s), corpus $(ls "$corpus" | wc -l)"
}

pids=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  while (($(jobs -rp | wc -l) >= jobs)); do sleep 1; done
done
wait
