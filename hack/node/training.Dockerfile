# The training image the node tests run: Debian's PyTorch and the repository's DataLoader workload
# (tests/e2e/dataloader_workload.py), so the Job's pod does what a training pod does with /dev/shm.
# Built by tests/node from tests/e2e as the context; Docker's layer cache keys it by these inputs.
#   docker build -t shmguard-training:test -f hack/node/training.Dockerfile tests/e2e
FROM debian:12
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends python3-torch \
    && rm -rf /var/lib/apt/lists/*
COPY dataloader_workload.py /opt/shmguard/dataloader_workload.py
CMD ["python3", "/opt/shmguard/dataloader_workload.py", "--help"]
