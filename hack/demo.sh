#!/usr/bin/env bash
# The main job, end to end on the bundled examples: builds shmguard (only the binary; an
# incremental build every time, so a `git pull` is never demonstrated with an old binary),
# shows the sizing calculator, checks examples/ (text and GitHub annotations), mutates them
# surgically, runs the KRM function, measures a small DataLoader with `observe`, then starts the
# webhook locally over TLS and sends it real AdmissionReviews the way kube-apiserver does.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/hack/deps.sh" demo
[[ -f "$root/build/build.ninja" ]] || cmake -S "$root" -B "$root/build" -G Ninja >/dev/null
cmake --build "$root/build" --target shmguard -j "$(nproc)" | { grep -v '^\[' || true; }  # a failed build stops here
bin="$root/build/shmguard"
if [[ -t 1 ]]; then
  say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  say() { printf '\n== %s\n' "$*"; }
fi

say "The calculator: 64 samples x 588Ki, 8 workers, 4 processes per pod (torchrun, 4 GPUs)"
"$bin" size --batch-size 64 --num-workers 8 --sample-size 588Ki --procs-per-pod 4
say "The same need against a 4Gi memory limit (JSON)"
"$bin" size --batch-size 64 --num-workers 8 --sample-size 588Ki --procs-per-pod 4 --memory-limit 4Gi -o json

say "CI gate: shmguard check -f examples/   (exit 1: some training pods would crash)"
set +e
"$bin" check -f "$root/examples"
echo "exit code: $?"
set -e

say "The same in a GitHub Actions workflow: shmguard check -f examples/ -o github"
"$bin" check -f "$root/examples" -o github || true

say "shmguard mutate -f examples/pytorchjob-resnet.yaml: the diff is only shmguard's lines"
"$bin" mutate -f "$root/examples/pytorchjob-resnet.yaml" >"${TMPDIR:-/tmp}/shmguard-demo-mutated.yaml"
diff -u "$root/examples/pytorchjob-resnet.yaml" "${TMPDIR:-/tmp}/shmguard-demo-mutated.yaml" || true
rm -f "${TMPDIR:-/tmp}/shmguard-demo-mutated.yaml"

say "shmguard fn: the KRM function (kustomize/kpt) on a ResourceList of examples/pod-pytorch-image.yaml"
python3 -c 'import sys,yaml; print(yaml.safe_dump({"apiVersion":"config.kubernetes.io/v1","kind":"ResourceList","items":[yaml.safe_load(open(sys.argv[1]))]}, sort_keys=False))' \
  "$root/examples/pod-pytorch-image.yaml" | "$bin" fn | sed -n '/^results:/,$p'

say "shmguard observe: a small DataLoader (32 x 1 MiB samples, 4 workers) in a private 1Gi /dev/shm"
if [[ $(id -u) -eq 0 ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  "$bin" observe --shm-size 1Gi --batch-size 32 --num-workers 4 -- /usr/bin/python3 \
    "$root/tests/e2e/dataloader_workload.py" --batch-size 32 --num-workers 4 --sample-size 1048576 \
    --steps 12 --step-seconds 0.2 2>&1 >/dev/null | grep -v -e UserWarning -e warnings.warn
else
  echo "(skipped: needs root and python3-torch)"
fi

say "The webhook: shmguard serve on 127.0.0.1 with a certificate for shmguard.shmguard.svc"
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$root/hack/gen-certs.sh" "$work/certs" shmguard shmguard >/dev/null
"$bin" serve --tls-cert-file "$work/certs/tls.crt" --tls-private-key-file "$work/certs/tls.key" \
  --port 0 --metrics-port 0 --bind-address 127.0.0.1 --shutdown-delay-ms 200 2>"$work/serve.log" &
pid=$!
for _ in $(seq 100); do grep -q '"msg":"serving"' "$work/serve.log" 2>/dev/null && break; sleep 0.05; done
port=$(grep -o '"port":[0-9]*' "$work/serve.log" | head -1 | cut -d: -f2)
mport=$(grep -o '"metrics_port":[0-9]*' "$work/serve.log" | cut -d: -f2)
echo "listening: https://shmguard.shmguard.svc:$port/mutate (metrics on :$mport)"

send() {  # $1: title, $2: pod JSON
  local review
  review=$(python3 -c 'import json,sys,uuid; pod=json.loads(sys.argv[1]); print(json.dumps({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":str(uuid.uuid4()),"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"ml","operation":"CREATE","object":pod}}))' "$2")
  say "AdmissionReview: $1"
  curl -sS --cacert "$work/certs/ca.crt" --resolve "shmguard.shmguard.svc:$port:127.0.0.1" \
    -H 'Content-Type: application/json' --data-binary "$review" \
    "https://shmguard.shmguard.svc:$port/mutate?timeout=5s" |
    python3 -c 'import base64,json,sys; r=json.load(sys.stdin)["response"]; print("allowed:", r["allowed"]); [print("warning:", w) for w in r.get("warnings",[])]; print("patch:" if "patch" in r else "no patch"); "patch" in r and print(json.dumps(json.loads(base64.b64decode(r["patch"])), indent=2))'
}
send "a Kubeflow worker pod with DataLoader annotations" \
  '{"metadata":{"generateName":"resnet50-worker-","labels":{"training.kubeflow.org/job-name":"resnet50"},"annotations":{"shmguard.io/batch-size":"64","shmguard.io/num-workers":"8","shmguard.io/sample-size":"588Ki"}},"spec":{"containers":[{"name":"pytorch","image":"nvcr.io/nvidia/pytorch:24.05-py3","resources":{"limits":{"nvidia.com/gpu":"4","memory":"96Gi"}}}]}}'
send "a pytorch image whose need exceeds its memory limit" \
  '{"metadata":{"name":"tight","annotations":{"shmguard.io/batch-size":"256","shmguard.io/num-workers":"16","shmguard.io/sample-size":"1Mi"}},"spec":{"containers":[{"name":"train","image":"pytorch/pytorch:2.4.0","resources":{"limits":{"memory":"8Gi"}}}]}}'
send "a web server (not a training pod)" \
  '{"metadata":{"name":"web"},"spec":{"containers":[{"name":"nginx","image":"nginx:1.25"}]}}'

say "Server log (one JSON object per line)"
cat "$work/serve.log"
say "Metrics (excerpt)"
curl -sS "http://127.0.0.1:$mport/metrics" | grep -E '^shmguard_(admissions_total|certificate_expiry|build_info)'
kill -TERM "$pid"
wait "$pid" && echo "server exited cleanly after SIGTERM"
