"""shmguard's `rejected` finding (an annotation value that is not a string) agrees with the real
API server: what kube-apiserver refuses, `check` fails as rejected; what it takes (null becomes
""), `check` does not call rejected."""
import subprocess

import pytest

from pylib.paths import BIN

POD = """apiVersion: v1
kind: Pod
metadata:
  name: types
  annotations:
    shmguard.io/batch-size: {value}
    shmguard.io/num-workers: "4"
    shmguard.io/sample-size: 1Mi
spec:
  containers: [{{name: c, image: pytorch/pytorch}}]
"""


@pytest.mark.parametrize("value", ["64", "true", "null", '"64"'])
def test_rejected_means_what_the_api_server_refuses(cluster, tmp_path, value):
    text = POD.format(value=value)
    api = cluster.kubectl("create", "--dry-run=server", "-f", "-", stdin=text, check=False)
    f = tmp_path / "pod.yaml"
    f.write_text(text)
    r = subprocess.run([BIN, "check", "-f", str(f), "--fail-on", "rejected"], capture_output=True, text=True)
    refused = api.returncode != 0
    assert refused == (value in ("64", "true")), api.stderr
    if refused:
        assert "cannot unmarshal" in api.stderr
    assert (r.returncode == 1 and ": error: annotation shmguard.io/batch-size" in r.stdout) == refused, r.stdout
