"""A `shmguard serve` child process on loopback, its certificates (hack/gen-certs.sh), and the
AdmissionReviews a test sends it; a TLS client that verifies the certificate by service DNS name
exactly as kube-apiserver does."""
import base64
import http.client
import json
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

from pylib.paths import BIN, HACK

SERVICE_DNS = "shmguard.shmguard.svc"


def gen_certs(out_dir, svc="shmguard", ns="shmguard"):
    subprocess.run([str(HACK / "gen-certs.sh"), str(out_dir), svc, ns], check=True,
                   stdout=subprocess.DEVNULL)
    return Path(out_dir)


class Server:
    """A `shmguard serve` child process on loopback ports chosen by the kernel."""

    def __init__(self, cert, key, ca, extra_args=(), config=None, shutdown_delay_ms=300):
        args = [BIN, "serve", "--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
                "--port", "0", "--metrics-port", "0", "--bind-address", "127.0.0.1",
                "--reload-interval-ms", "200", "--shutdown-delay-ms", str(shutdown_delay_ms)]
        if config:
            args += ["--config", str(config)]
        args += list(extra_args)
        self.ca = str(ca)
        self.log_path = Path(tempfile.mkstemp(prefix="shmguard-serve-", suffix=".log")[1])
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 10
        self.port = self.metrics_port = None
        while time.time() < deadline:
            for line in self.log_path.read_text().splitlines():
                if '"msg":"serving"' in line:
                    rec = json.loads(line)
                    self.port, self.metrics_port = rec["port"], rec["metrics_port"]
            if self.port or self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if not self.port:
            raise RuntimeError("server did not start:\n" + self.log_path.read_text())

    def logs(self):
        return [json.loads(l) for l in self.log_path.read_text().splitlines() if l.startswith("{")]

    def tls_context(self, **kw):
        ctx = ssl.create_default_context(cafile=self.ca)
        for k, v in kw.items():
            setattr(ctx, k, v)
        return ctx

    def connection(self, server_hostname=SERVICE_DNS, ctx=None, timeout=10):
        """An HTTPS connection to 127.0.0.1 that verifies the certificate for the service name."""
        ctx = ctx or self.tls_context()
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=timeout)
        # http.client verifies against the host it connects to; make it the service DNS name.
        conn._tunnel_host = None
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        # As Go's client does: without it, headers and body go out as two segments and Nagle
        # plus delayed ACKs add 40 ms to every request.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sock = ctx.wrap_socket(raw, server_hostname=server_hostname)
        return conn

    def post(self, body, content_type="application/json", conn=None, path="/mutate?timeout=10s"):
        own = conn is None
        conn = conn or self.connection()
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        headers = {"Content-Type": content_type} if content_type else {}
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        if own:
            conn.close()
        return resp.status, data

    def metrics(self):
        c = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        return text

    def metric(self, name, labels=""):
        m = re.search(r"^" + re.escape(name + labels) + r" (\S+)$", self.metrics(), re.M)
        return float(m.group(1)) if m else 0.0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def slow_header_clients(server, n):
    """n TLS clients that have started a request and will only ever send more header lines."""
    ctx = server.tls_context()
    slow = []
    for _ in range(n):
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)), server_hostname=SERVICE_DNS)
        s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    return slow


def worst_live_admission(server, slow, rounds, pause=0.0):
    """The slowest of `rounds` real admissions, each after one more header line from every slow client.
    A slow client the server has closed (its header deadline passed: on a loaded machine the rounds
    take longer) is the server defending itself, not a failure; it stops sending."""
    worst = 0.0
    for _ in range(rounds):
        for s in list(slow):
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:  # closed by the server
                slow.remove(s)
                s.close()
        t = time.perf_counter()
        status, _ = server.post(review(training_pod()))
        worst = max(worst, time.perf_counter() - t)
        assert status == 200
        time.sleep(pause)
    return worst


def review(pod, api_version="admission.k8s.io/v1", uid="b5f9d4f0-0c1e-4f0b-9a3c-6d1c2a7e9f10",
           operation="CREATE", name=None, namespace="ml", dry_run=False):
    req = {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
           "resource": {"group": "", "version": "v1", "resource": "pods"},
           "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
           "namespace": namespace, "operation": operation,
           "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
           "object": pod, "oldObject": None, "dryRun": dry_run,
           "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}
    if name is not None:  # controller-made pods have no request.name key at all
        req["name"] = name
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": req}


def decode_patch(response):
    raw = response["patch"]
    assert len(raw) % 4 == 0, "patch must be padded standard base64"
    return json.loads(base64.b64decode(raw, validate=True))


def training_pod(generate=True, **annotations):
    meta = {"labels": {"training.kubeflow.org/job-name": "mnist",
                       "training.kubeflow.org/replica-type": "worker"}}
    if generate:
        meta["generateName"] = "mnist-worker-"
    else:
        meta["name"] = "mnist-worker-0"
    if annotations:
        meta["annotations"] = {f"shmguard.io/{k.replace('_', '-')}": v for k, v in annotations.items()}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "pytorch", "image": "docker.io/kubeflowkatib/pytorch-mnist:v1",
                                     "resources": {"limits": {"memory": "64Gi", "cpu": "8"}}}],
                     "restartPolicy": "OnFailure"}}
