"""How full a pod's /dev/shm is, measured on the real node: a real DataLoader holds its peak
((W x P + 1) batches in /dev/shm) in the /dev/shm shmguard injected, and `shmguard monitor` reads the
real kubelet's Summary API. The monitor's figures agree with the pod's own statvfs, while the
kubelet's usedBytes (a `du` walk) reads about 0: PyTorch unlinks its segments. A pod filled past 90%
gets the Event. (This node's kubelet listens on loopback, where the API server does not proxy:
`top`'s node-proxy path is tests/cluster/test_top.py's.)"""
import json
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

from conftest import BIN, TRAINING_IMAGE

MiB = 1 << 20
BATCH, WORKERS, PREFETCH, SAMPLE = 16, 2, 2, 4 * MiB
EXPECTED_PEAK = (WORKERS * PREFETCH + 1) * BATCH * SAMPLE  # 320 MiB
# Steps slower than the kubelet's volume stats period (1m): the queue stays full that long.
WORKLOAD = f"--batch-size {BATCH} --num-workers {WORKERS} --sample-size {SAMPLE} --steps 4 --step-seconds 50"
STATVFS = "import os; s = os.statvfs('/dev/shm'); print((s.f_blocks - s.f_bfree) * s.f_frsize)"
FILL = ("import os, time\n"
        "fd = os.open('/dev/shm/fill', os.O_CREAT | os.O_RDWR)\n"
        "for _ in range(950): os.write(fd, b'x' * (1 << 20))\n"
        "os.unlink('/dev/shm/fill')\n"
        "print('filled', flush=True)\n"
        "time.sleep(600)\n")


def pod(name, command, size="1Gi"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"shmguard.io/size": size}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [{
                "name": "train", "image": TRAINING_IMAGE, "imagePullPolicy": "Never", "command": command}]}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(text, name, pod_name):
    m = re.search(name + r'\{namespace="[^"]*",pod="' + pod_name + r'",[^}]*\} (\d+)', text)
    return int(m.group(1)) if m else None


def kubelet_summary(node):
    port = re.search(r"^port: (\d+)$", (node.dir / "node" / "kubelet.yaml").read_text(), re.M).group(1)
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/stats/summary", context=ctx, timeout=10) as r:
        return json.loads(r.read())


def test_monitor_reads_the_real_kubelet_and_agrees_with_the_pods_statvfs(release):
    node = release
    ns = node.namespace("shm-usage")
    node.apply(pod("dl", ["python3", "/opt/shmguard/dataloader_workload.py", *WORKLOAD.split()]), "-n", ns)
    node.apply(pod("fill", ["python3", "-c", FILL]), "-n", ns)
    port = free_port()
    mon = subprocess.Popen([BIN, "monitor", "--listen", f"127.0.0.1:{port}", "--period", "5", "--kubelet-insecure-tls"],
                           env=node.env, stderr=subprocess.PIPE, text=True)
    try:
        def loaded():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:  # not listening yet
                return None
            used = metric(text, "shmguard_shm_used_bytes", "dl")
            return text if used and used >= 0.9 * EXPECTED_PEAK else None
        t0 = time.time()
        text = node.wait("the monitor sees dl's DataLoader peak", loaded, timeout=240, every=2)
        waited = time.time() - t0
        used = metric(text, "shmguard_shm_used_bytes", "dl")
        size = metric(text, "shmguard_shm_size_bytes", "dl")
        peak = metric(text, "shmguard_shm_peak_bytes", "dl")
        own = [int(node.kubectl("exec", "-n", ns, "dl", "--", "python3", "-c", STATVFS).stdout) for _ in range(2)]
        summary = kubelet_summary(node)
        vol = next(v for p in summary["pods"] if p["podRef"]["name"] == "dl" and p["podRef"]["namespace"] == ns
                   for v in p.get("volume", []) if v["name"] == "shmguard-dshm")
        sys.stderr.write(f"shm usage: monitor used {used} peak {peak} size {size}; the pod's statvfs {own}; "
                         f"kubelet usedBytes {vol.get('usedBytes')}, capacity-available "
                         f"{vol['capacityBytes'] - vol['availableBytes']}; expected peak {EXPECTED_PEAK}; "
                         f"{waited:.0f}s until the kubelet reported it\n")
        assert size == 1 << 30
        assert min(abs(used - o) for o in own) <= 0.02 * used, (used, own)
        assert abs(peak - EXPECTED_PEAK) <= 0.05 * EXPECTED_PEAK, (peak, EXPECTED_PEAK)
        assert vol["usedBytes"] < 1 * MiB  # the `du` walk finds the unlinked segments' 0 bytes
        # The pod past 90% gets one Warning Event with the suggestion; the DataLoader's pod none.
        events = node.wait("the ShmNearlyFull event", lambda: [
            e for e in node.get("events", "-n", ns)["items"] if e["reason"] == "ShmNearlyFull"] or None,
            timeout=180, every=2)
        assert [e["involvedObject"]["name"] for e in events] == ["fill"]
        assert "full" in events[0]["message"] and "shmguard.io/size:" in events[0]["message"]
        described = node.kubectl("describe", "pod", "fill", "-n", ns).stdout
        assert "ShmNearlyFull" in described
    finally:
        mon.terminate()
        _, err = mon.communicate(timeout=30)
        node.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    assert mon.returncode == 0, err[-2000:]
