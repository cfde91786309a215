"""What the Python suites (tests/e2e, tests/cluster, tests/node, tests/chart) share, imported as
`from pylib.<module> import ...`: tests/pytest.ini puts tests/ on the path (`pythonpath`).

  paths          the checkout, the binary under test, hack/, whether it is a sanitizer build
  cli            the binary run as a command (run), git in a tree
  webhook        a running `shmguard serve`, its certificates, AdmissionReviews and patches
  cluster        a kube-apiserver from hack/cluster.sh: kubectl/helm, webhook configurations,
                 a service account's kubeconfig, the image run in Docker as a kubelet would
  node           the real node of `hack/cluster.sh up --node`: images, Jobs, the host's state
  pytorch        the real DataLoader workload in a private /dev/shm, quantities as bytes
  readme_blocks  the sections and shell blocks of README.md and docs/*.md
"""
