#!/usr/bin/env bash
# Regenerates deploy/ from the Helm chart (cert-manager certificates, namespace shmguard).
# tests/chart/test_chart.py fails when deploy/ is not what this script writes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/hack/deps.sh" chart
/usr/bin/python3 "$root/hack/gen_deploy.py" "${1:-$root/deploy}"
