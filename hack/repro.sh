#!/usr/bin/env bash
# The whole story with real PyTorch, for a person to watch: a DataLoader crashes with a bus error
# in a pod-sized 64 MiB /dev/shm, shmguard sizes /dev/shm from the same parameters, and the same
# DataLoader finishes in that size. Needs root (private /dev/shm mounts with unshare -m).
# usage: hack/repro.sh [BATCH [WORKERS [SAMPLE_BYTES [PREFETCH [PROCS]]]]]   (default 32 4 1048576 2 1)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
batch=${1:-32} workers=${2:-4} sample=${3:-1048576} prefetch=${4:-2} procs=${5:-1}
"$root/hack/deps.sh" test
[[ -x "$root/build/shmguard" ]] || "$root/hack/build.sh" "$root/build"
bin="$root/build/shmguard"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() {  # $1: tmpfs size in bytes
  unshare -m sh -c "mount -t tmpfs -o size=$1 tmpfs /dev/shm && exec /usr/bin/python3 \
    $root/tests/e2e/dataloader_workload.py --batch-size $batch --num-workers $workers \
    --sample-size $sample --prefetch-factor $prefetch --procs $procs --steps 16 --step-seconds 0.25"
}

say "DataLoader: batch $batch x $sample bytes, $workers workers, prefetch $prefetch, $procs process(es)"
say "1. In a pod's default 64 MiB /dev/shm"
set +e
run $((64 << 20)) >/tmp/shmguard-repro.out 2>/tmp/shmguard-repro.err
code=$?
set -e
grep -a -m1 "killed by signal" /tmp/shmguard-repro.err || tail -3 /tmp/shmguard-repro.err
echo "exit code: $code"

say "2. The size shmguard picks for these annotations"
"$bin" size --batch-size "$batch" --num-workers "$workers" --sample-size "$sample" \
  --prefetch-factor "$prefetch" --procs-per-pod "$procs"
bytes=$("$bin" size --batch-size "$batch" --num-workers "$workers" --sample-size "$sample" \
  --prefetch-factor "$prefetch" --procs-per-pod "$procs" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes"])')

say "3. The same DataLoader in a /dev/shm of exactly that size"
run "$bytes" 2>/dev/null | tail -1 | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
size, peak = int(sys.argv[1]), r["peak_shm_bytes"]
print("finished: exit codes", r["exit_codes"])
print("peak /dev/shm use: %.1f MiB of %.0f MiB (size/peak %.2f)" % (peak / 2**20, size / 2**20, size / peak))
' "$bytes"
