"""Hostile clients against the real server, and hostile input to the offline reader: every answer
is a 200 that admits or a 4xx with a message, never a 5xx, a reset or a crash; memory stays flat."""
import json
import socket
import ssl
import struct
import subprocess
import threading
import time

import pytest

from pylib.cli import run
from pylib.paths import SANITIZED
from pylib.webhook import SERVICE_DNS, review, slow_header_clients, training_pod, worst_live_admission


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pod_with(path, value):
    pod = training_pod()
    node = pod
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value
    return pod


WRONG_TYPES = [
    (["metadata", "labels"], ["a", "b"]),
    (["metadata", "labels"], "shmguard.io/inject=true"),
    (["metadata", "annotations"], [1, 2, 3]),
    (["metadata", "annotations"], {"shmguard.io/batch-size": {"nested": True}}),
    (["metadata", "annotations"], {"shmguard.io/batch-size": 32, "shmguard.io/num-workers": 4.5,
                                   "shmguard.io/sample-size": True}),
    (["metadata"], "string"),
    (["metadata"], None),
    (["spec"], None),
    (["spec"], [1]),
    (["spec", "containers"], "nope"),
    (["spec", "containers"], [None, 1, "x", []]),
    (["spec", "containers"], [{"name": 1, "image": 2, "volumeMounts": "x", "resources": []}]),
    (["spec", "containers"], [{"image": "pytorch/pytorch", "resources": {"limits": {"memory": ["1Gi"],
                                                                                   "nvidia.com/gpu": "lots"}}}]),
    (["spec", "volumes"], {"name": "x"}),
    (["spec", "volumes"], [None, {"name": None, "emptyDir": "x"}]),
    (["spec", "hostIPC"], "true"),
    (["spec", "initContainers"], 7),
    (["metadata", "name"], "x" * 200000),
    (["metadata", "annotations"], {"k%d" % i: "v" * 100 for i in range(20000)}),
]


@pytest.mark.parametrize("path,value", WRONG_TYPES, ids=[f"{'.'.join(p)}-{i}" for i, (p, _) in enumerate(WRONG_TYPES)])
def test_wrong_types_are_admitted_or_rejected_never_5xx(server, path, value):
    status, body = server.post(review(pod_with(path, value)))
    assert status in (200, 400), (status, body[:300])
    if status == 200:
        assert json.loads(body)["response"]["allowed"] is True


@pytest.mark.parametrize("body", [
    b"", b"null", b"[]", b"{}", b"123", b'"str"', b"{" * 100000, b"[" * 3000000,
    json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": None}).encode(),
    json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": None}}).encode(),
    json.dumps({"apiVersion": 1, "kind": [], "request": {}}).encode(),
    bytes(range(256)) * 100,
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"\xff\xfe"}}',
    b'{"a":' + b'"' + b"x" * (7 * 1024 * 1024) + b'"}',
], ids=lambda b: f"{len(b)}-bytes-{b[:12]!r}"[:40])
def test_garbage_bodies(server, body):
    status, data = server.post(body)
    assert status in (200, 400), (status, data[:200])
    assert data


def test_plain_http_and_garbage_on_the_tls_port(server):
    for payload in [b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", bytes(range(256)) * 64, b"\x16\x03\x01\xff\xff" + b"A" * 70000]:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        try:
            s.sendall(payload)
            s.settimeout(5)
            try:
                s.recv(4096)
            except (ConnectionResetError, socket.timeout):
                pass
        finally:
            s.close()
    assert server.post(review(training_pod()))[0] == 200
    assert server.proc.poll() is None
    # Each failed handshake is counted with OpenSSL's reason, and logged (at most once a second).
    assert server.metric("shmguard_tls_handshake_failures_total", '{reason="http request"}') >= 1, server.metrics()
    assert any(l.get("msg") == "TLS handshake failed" and l.get("reason") for l in server.logs())


def test_a_client_that_does_not_trust_the_certificate_is_named(server, tmp_path):
    """What the API server does when the webhook's caBundle is wrong: it refuses our certificate and
    says so in a TLS alert, which the webhook counts and logs by that reason."""
    other = tmp_path / "other-ca.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "k"),
                    "-out", str(other), "-days", "1", "-subj", "/CN=other"], check=True, capture_output=True)
    ctx = ssl.create_default_context(cafile=str(other))
    time.sleep(1.1)  # past the log's once-a-second limit
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        tls = ctx.wrap_socket(raw, server_hostname=SERVICE_DNS, do_handshake_on_connect=False)
        with pytest.raises(ssl.SSLCertVerificationError):
            tls.do_handshake()
        # The client stopped reading at the certificate: the server's CertificateVerify and
        # Finished are still unread, so closing at once sends a RST, which can reach the server
        # before it reads the alert and take the alert with it. Closing after the server has read
        # it is what the test is about (an API server's client keeps the socket until it is done).
        deadline = time.time() + 5
        while time.time() < deadline and not server.metric("shmguard_tls_handshake_failures_total",
                                                           '{reason="tlsv1 alert unknown ca"}'):
            time.sleep(0.05)
        tls.close()
    deadline = time.time() + 5
    while time.time() < deadline and not server.metric("shmguard_tls_handshake_failures_total",
                                                       '{reason="tlsv1 alert unknown ca"}'):
        time.sleep(0.05)
    assert server.metric("shmguard_tls_handshake_failures_total", '{reason="tlsv1 alert unknown ca"}') == 1, server.metrics()
    assert any(l.get("msg") == "TLS handshake failed" and l.get("reason") == "tlsv1 alert unknown ca"
               for l in server.logs()), server.logs()[-3:]


@pytest.mark.parametrize("how,reason", [("garbage", "wrong version number"), ("close", "connection closed"),
                                        ("reset", "connection reset")])
def test_a_failed_handshake_is_counted_and_logged_by_its_reason(server, how, reason):
    """What a port scanner, a load balancer's TCP check or a client that gives up does to the
    webhook port: bytes that are no ClientHello (OpenSSL's reason), a close before the handshake
    (OpenSSL 3's "unexpected eof while reading"), a reset (SO_LINGER 0: an RST, the server sees
    EPOLLERR). Each is counted by its reason and logged with it and OpenSSL's or the system's words;
    the server serves on."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    if how == "garbage":
        s.sendall(b"\x00\x01 garbage, not a ClientHello\r\n\r\n")
        try:
            s.recv(4096)  # the server's alert, or its reset
        except (ConnectionResetError, socket.timeout):
            pass
    elif how == "reset":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    series = "shmguard_tls_handshake_failures_total"
    deadline = time.time() + 5
    while time.time() < deadline and not server.metric(series, f'{{reason="{reason}"}}'):
        time.sleep(0.05)
    lines = [l for l in server.metrics().splitlines() if l.startswith(series + "{")]
    assert lines == [f'{series}{{reason="{reason}"}} 1'], lines
    logged = [l for l in server.logs() if l.get("msg") == "TLS handshake failed"]
    assert [l["reason"] for l in logged] == [reason], logged
    assert logged[0]["level"] == "warn"
    detail = logged[0]["error"]
    if how == "reset":
        assert detail == "Connection reset by peer", logged
    else:  # OpenSSL's error string, with its code: "error:0A00010B:SSL routines::wrong version number"
        assert detail.startswith("error:") and detail.endswith(":" + ("unexpected eof while reading"
                                                                     if how == "close" else reason)), logged
    assert server.post(review(training_pod()))[0] == 200


def test_abrupt_disconnects_mid_request(server):
    ctx = server.tls_context()
    body = json.dumps(review(training_pod())).encode()
    for cut in [0, 10, 60, len(body) // 2]:
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)), server_hostname=SERVICE_DNS)
        s.sendall(b"POST /mutate HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        s.sendall(body[:cut])
        s.close()
    assert server.post(review(training_pod()))[0] == 200


@pytest.mark.skipif(SANITIZED, reason="RSS follows ASan's quarantine; LeakSanitizer checks leaks in this build")
def test_memory_stays_flat_under_sustained_traffic(server):
    body = json.dumps(review(training_pod(batch_size="32", num_workers="4", sample_size="1Mi")))
    bad = b"{" * 200

    def burst(n):
        conn = server.connection()
        for i in range(n):
            server.post(body if i % 10 else bad, conn=conn)
        conn.close()

    for _ in range(4):
        burst(500)  # warm up allocator pools and caches
    before = rss_kb(server.proc.pid)
    threads = [threading.Thread(target=burst, args=(2500,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = rss_kb(server.proc.pid)
    print(f"\nRSS over 10,000 requests: {before} KiB -> {after} KiB")
    assert after - before < 8 * 1024, f"RSS grew from {before} KiB to {after} KiB over 10,000 requests"


def test_many_new_connections(server):
    ctx = server.tls_context()
    for _ in range(300):
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)), server_hostname=SERVICE_DNS)
        s.close()
    assert server.post(review(training_pod()))[0] == 200
    deadline = time.time() + 5
    while time.time() < deadline and server.metric("shmguard_admissions_total", '{decision="injected",reason="injected"}') < 1:
        time.sleep(0.1)


# ---- the offline reader ----


def timed(args, stdin):
    """The CLI on `stdin` and how long it took; a run may take as long as the tests' own bounds allow
    (5x under sanitizers)."""
    t = time.time()
    r = run(*args, stdin=stdin, text=False, timeout=300 if SANITIZED else 60)
    return r, time.time() - t


def test_alias_bomb_is_refused_quickly():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for c in "bcdefghi":
        lines.append(f"{c}: &{c} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = c
    doc = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" +
           "\n".join("  " + l for l in lines) + "\n").encode()
    for cmd in (["mutate", "-f", "-"], ["check", "-f", "-"]):
        r, secs = timed(cmd, doc)
        assert r.returncode == 2 and r.stdout == b"", r.stdout[:200]
        assert b"too many nodes" in r.stderr
        assert secs < (60 if SANITIZED else 10)


@pytest.mark.parametrize("payload", [bytes(range(256)) * 40, b"kind: Pod\nmetadata: {name: \xff\xfe}\n",
                                     b"\x00" * 1000, b"a: b\n\tc: d\n", b"- [" * 5000],
                         ids=["binary", "invalid-utf8", "nul-bytes", "tab-indent", "deep-flow"])
def test_garbage_manifests(payload):
    r, secs = timed(["mutate", "-f", "-"], payload)
    assert r.returncode == 2 and r.stdout == b"" and b"<stdin>" in r.stderr
    assert secs < (60 if SANITIZED else 10)


def test_huge_document_is_bounded():
    # One 30 MB document with 200,000 containers: handled, in bounded time.
    containers = "".join(f"  - name: c{i}\n    image: pytorch/pytorch\n" for i in range(200000))
    doc = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\nspec:\n  containers:\n" + containers).encode()
    r, secs = timed(["check", "-f", "-"], doc)
    assert r.returncode == 1, r.stderr[-300:]
    assert b"would inject" in r.stdout
    assert secs < (300 if SANITIZED else 30)


def test_600_slow_header_clients_do_not_starve_live_requests(server):
    """What starves a thread-per-connection server (docs/development.md "Libraries"): 600 TLS clients that
    send one header line a second and never finish. Live admissions must stay under 1 s."""
    slow = slow_header_clients(server, 600)
    worst = worst_live_admission(server, slow, rounds=25, pause=0.2)
    for s in slow:
        s.close()
    print(f"\n600 slow-header clients: worst live admission {worst * 1000:.1f} ms")
    assert worst < 1.0, f"a live request took {worst:.3f}s beside 600 slow clients"
