"""`shmguard serve` end to end over TLS on loopback, acting as kube-apiserver does."""
import json
import os
import signal
import socket
import ssl
import threading
import time

import jsonpatch
import pytest

from pylib.webhook import SERVICE_DNS, Server, decode_patch, gen_certs, review, slow_header_clients, training_pod, worst_live_admission


def admit(server, pod, **kw):
    status, body = server.post(review(pod, **kw))
    assert status == 200, body
    out = json.loads(body)
    return out, out["response"]


@pytest.mark.parametrize("api_version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
@pytest.mark.parametrize("generate", [True, False])
def test_review_patch_applies_and_is_idempotent(server, api_version, generate):
    pod = training_pod(generate=generate, batch_size="32", num_workers="4", sample_size="1Mi",
                       prefetch_factor="4")
    out, resp = admit(server, pod, api_version=api_version, name=None if generate else "mnist-worker-0")
    assert out["apiVersion"] == api_version and out["kind"] == "AdmissionReview"
    assert resp["uid"] == "b5f9d4f0-0c1e-4f0b-9a3c-6d1c2a7e9f10"
    assert resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(pod, decode_patch(resp))  # an independent RFC 6902 implementation
    vol = patched["spec"]["volumes"][-1]
    assert vol == {"name": "shmguard-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1120Mi"}}
    assert {"name": "shmguard-dshm", "mountPath": "/dev/shm"} in patched["spec"]["containers"][0]["volumeMounts"]
    assert patched["metadata"]["annotations"]["shmguard.io/injected-size"] == "1120Mi"
    # Re-invocation (reinvocationPolicy IfNeeded) on the patched pod: no further patch.
    _, again = admit(server, patched, api_version=api_version)
    assert again["allowed"] is True and "patch" not in again
    logs = [l for l in server.logs() if l.get("msg") == "admission"]
    assert logs[0]["pod"] == ("mnist-worker-*" if generate else "mnist-worker-0")
    assert logs[0]["decision"] == "injected" and logs[0]["size"] == "1120Mi" and logs[0]["namespace"] == "ml"
    assert "latency_ms" in logs[0] and logs[0]["uid"]


def test_dry_run_and_non_create_and_non_pod(server):
    _, resp = admit(server, training_pod(), dry_run=True)
    assert "patch" in resp  # sideEffects None: a dry run gets the same answer
    _, resp = admit(server, training_pod(), operation="UPDATE")
    assert resp["allowed"] is True and "patch" not in resp
    r = review(training_pod())
    r["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    status, body = server.post(r)
    assert status == 200 and "patch" not in json.loads(body)["response"]


def test_not_training_and_warnings(server):
    pod = {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    _, resp = admit(server, pod)
    assert "patch" not in resp and "warnings" not in resp
    pod = training_pod(batch_size="many\u0007")
    _, resp = admit(server, pod)
    assert resp["warnings"] and all(ord(c) >= 0x20 for c in resp["warnings"][0])
    assert "shmguard.io/batch-size" in resp["warnings"][0]


def test_certificate_is_verified_by_service_dns_name(server):
    assert server.connection(SERVICE_DNS).sock.version() in ("TLSv1.2", "TLSv1.3")
    with pytest.raises(ssl.SSLCertVerificationError):
        server.connection("other.example.svc")


def test_bad_requests(server):
    assert server.post("not json")[0] == 400
    assert server.post({"kind": "AdmissionReview"})[0] == 400
    status, body = server.post("[" * 100000)
    assert status == 400 and b"nesting deeper than 128" in body
    assert server.post(review(training_pod()), content_type="text/plain")[0] == 415
    assert server.post(review(training_pod()), content_type=None)[0] == 415
    assert server.post(review(training_pod()), content_type="application/json; charset=utf-8")[0] == 200
    status, body = server.post(b"{" + b" " * (8 * 1024 * 1024 + 10) + b"}")
    assert status == 413
    conn = server.connection()
    conn.request("GET", "/mutate")
    assert conn.getresponse().status == 405
    # Health on both listeners.
    conn = server.connection()
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"ok\n"
    metrics = server.metrics()
    assert 'shmguard_admissions_total{decision="rejected",reason="content-type"} 2' in metrics
    assert 'shmguard_http_responses_total{code="413"} 1' in metrics


def test_keep_alive_connection_serves_many(server):
    conn = server.connection()
    for i in range(50):
        status, body = server.post(review(training_pod(), uid=f"uid-{i}"), conn=conn)
        assert status == 200 and json.loads(body)["response"]["uid"] == f"uid-{i}"
    conn.close()


def test_metrics_content(server):
    admit(server, training_pod())
    m = server.metrics()
    for name in ["shmguard_admissions_total{decision=\"injected\",reason=\"injected\"} 1",
                 "shmguard_admission_duration_seconds_bucket", "shmguard_injected_size_bytes_bucket",
                 "shmguard_certificate_expiry_timestamp_seconds", "shmguard_certificate_reloads_total",
                 "shmguard_build_info{version="]:
        assert name in m, name
    assert server.metric("shmguard_certificate_expiry_timestamp_seconds") > time.time()


def secret_volume(dir_, src, generation):
    """Lays out files the way the kubelet does for a Secret volume: tls.crt -> ..data/tls.crt,
    ..data -> ..<generation>, swapped atomically on update."""
    gen_dir = dir_ / f"..{generation}"
    gen_dir.mkdir()
    for f in ("tls.crt", "tls.key"):
        (gen_dir / f).write_bytes((src / f).read_bytes())
    tmp = dir_ / "..data_tmp"
    os.symlink(gen_dir.name, tmp)
    os.replace(tmp, dir_ / "..data")
    for f in ("tls.crt", "tls.key"):
        if not (dir_ / f).is_symlink():
            os.symlink(f"..data/{f}", dir_ / f)


def serial_of(sock):
    import hashlib
    return hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest()


def test_certificate_rotation_by_data_swap_under_traffic(tmp_path):
    ca = gen_certs(tmp_path / "a")
    first = tmp_path / "first"
    first.mkdir()
    for f in ("tls.crt", "tls.key"):
        (first / f).write_bytes((ca / f).read_bytes())
    gen_certs(tmp_path / "a")  # same CA, new serving key pair
    vol = tmp_path / "secret"
    vol.mkdir()
    secret_volume(vol, first, "2026_01_01")
    srv = Server(vol / "tls.crt", vol / "tls.key", ca / "ca.crt")
    try:
        old_conn = srv.connection()
        before = serial_of(old_conn.sock)
        failures, done, count = [], threading.Event(), [0]

        def traffic():
            while not done.is_set():
                try:
                    status, _ = srv.post(review(training_pod()))
                    if status != 200:
                        failures.append(status)
                    count[0] += 1
                except Exception as e:  # noqa: BLE001 - any failure counts
                    failures.append(repr(e))

        threads = [threading.Thread(target=traffic) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        secret_volume(vol, ca, "2026_02_01")
        deadline = time.time() + 10
        while serial_of(srv.connection().sock) == before and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        done.set()
        for t in threads:
            t.join()
        assert serial_of(srv.connection().sock) != before, "new handshakes must get the new certificate"
        assert failures == [], failures
        assert count[0] > 20
        # The connection opened before the swap still works.
        assert srv.post(review(training_pod()), conn=old_conn)[0] == 200
        assert srv.metric("shmguard_certificate_reloads_total", '{result="ok"}') >= 1

        # A mismatched pair (key from elsewhere) is refused; the current certificate stays.
        current = serial_of(srv.connection().sock)
        other = gen_certs(tmp_path / "b")
        bad = tmp_path / "bad"
        bad.mkdir()
        (bad / "tls.crt").write_bytes((ca / "tls.crt").read_bytes())
        (bad / "tls.key").write_bytes((other / "tls.key").read_bytes())
        secret_volume(vol, bad, "2026_03_01")
        deadline = time.time() + 5
        while srv.metric("shmguard_certificate_reloads_total", '{result="failed"}') < 1 and time.time() < deadline:
            time.sleep(0.1)
        assert srv.metric("shmguard_certificate_reloads_total", '{result="failed"}') >= 1
        assert serial_of(srv.connection().sock) == current
        assert srv.post(review(training_pod()))[0] == 200
        assert any(l.get("msg", "").startswith("certificate reload failed") for l in srv.logs())
        # A half-written certificate file is refused too.
        half = tmp_path / "half"
        half.mkdir()
        (half / "tls.crt").write_bytes((ca / "tls.crt").read_bytes()[:200])
        (half / "tls.key").write_bytes((ca / "tls.key").read_bytes())
        secret_volume(vol, half, "2026_04_01")
        deadline = time.time() + 5
        while srv.metric("shmguard_certificate_reloads_total", '{result="failed"}') < 2 and time.time() < deadline:
            time.sleep(0.1)
        assert srv.metric("shmguard_certificate_reloads_total", '{result="failed"}') >= 2
        assert srv.post(review(training_pod()))[0] == 200
    finally:
        srv.stop()


def test_config_reload(tmp_path, certs):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("sizing:\n  default: 8Gi\n")
    srv = Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt", config=cfg)
    try:
        pod = training_pod()
        pod["spec"]["containers"][0]["resources"] = {}
        _, resp = admit(srv, pod)
        assert jsonpatch.apply_patch(pod, decode_patch(resp))["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "8Gi"
        cfg.write_text("sizing:\n  default: 2Gi\n")
        deadline = time.time() + 5
        size = None
        while time.time() < deadline:
            _, resp = admit(srv, pod)
            size = jsonpatch.apply_patch(pod, decode_patch(resp))["spec"]["volumes"][0]["emptyDir"]["sizeLimit"]
            if size == "2Gi":
                break
            time.sleep(0.1)
        assert size == "2Gi"
        cfg.write_text("sizing:\n  default: lots\n")  # invalid: keep the previous config
        deadline = time.time() + 5
        while srv.metric("shmguard_config_reloads_total", '{result="failed"}') < 1 and time.time() < deadline:
            time.sleep(0.1)
        _, resp = admit(srv, pod)
        assert jsonpatch.apply_patch(pod, decode_patch(resp))["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "2Gi"
    finally:
        srv.stop()


def test_tls_versions(server, certs):
    ctx = server.tls_context(minimum_version=ssl.TLSVersion.TLSv1, maximum_version=ssl.TLSVersion.TLSv1_1)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        server.connection(ctx=ctx)
    strict = Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt", extra_args=["--tls-min-version", "1.3"])
    try:
        ctx12 = strict.tls_context(maximum_version=ssl.TLSVersion.TLSv1_2)
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            strict.connection(ctx=ctx12)
        assert strict.connection().sock.version() == "TLSv1.3"
    finally:
        strict.stop()


def test_idle_and_slow_clients_do_not_delay_real_requests(server):
    idle = []
    for _ in range(300):  # TCP connections that never start a TLS handshake
        idle.append(socket.create_connection(("127.0.0.1", server.port)))
    ctx = server.tls_context()
    for _ in range(50):  # completed handshakes that never send a request
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port)), server_hostname=SERVICE_DNS)
        idle.append(s)
    slow = slow_header_clients(server, 50)  # slowloris: a header line now and then
    worst = worst_live_admission(server, slow, rounds=30)
    assert worst < 0.5, f"a real request took {worst:.3f}s beside idle and slow clients"
    for s in idle + slow:
        s.close()


def test_the_shutdown_delay_closes_each_connection_after_its_response(certs):
    """Between SIGTERM and the stop (the delay that lets endpoints and kube-proxy catch up) the
    server still answers, and closes each connection after its response: kube-proxy's rules steer
    only new connections, so a kept-alive one would carry the API server's requests to this pod
    until it stops, and the request that met the closing socket would admit its pod unchanged (a
    real node's rollout test saw exactly that miss). A client that connected just before the stop
    still gets its answer."""
    s = Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt", shutdown_delay_ms=2000)
    body = json.dumps(review(training_pod())).encode()

    def post(conn):
        conn.request("POST", "/mutate", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200 and json.loads(data)["response"]["allowed"] is True
        assert json.loads(data)["response"].get("patch"), "the pod should have been injected"
        return (r.getheader("Connection") or "").lower()

    try:
        kept = s.connection()
        assert post(kept) != "close"  # serving: kept alive
        s.proc.send_signal(signal.SIGTERM)
        t0 = time.time()
        time.sleep(0.3)
        assert post(kept) == "close"  # the same connection, answered, then closed
        assert post(s.connection()) == "close"  # a new one during the delay: the same
        time.sleep(max(0.0, t0 + 1.6 - time.time()))
        late = s.connection()  # TLS done ~0.4 s before the stop; the request follows ~0.6 s after it
        time.sleep(max(0.0, t0 + 2.6 - time.time()))
        assert post(late) == "close"
        assert s.proc.wait(10) == 0
    finally:
        s.stop()


def test_sigterm_finishes_in_flight_and_exits_zero(server):
    conn = server.connection()
    body = json.dumps(review(training_pod())).encode()
    # Start a request: headers and half the body.
    conn.putrequest("POST", "/mutate")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    conn.send(body[: len(body) // 2])
    time.sleep(0.1)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    # Readiness turns false while draining.
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", server.metrics_port, timeout=2)
    c.request("GET", "/readyz")
    assert c.getresponse().status == 503
    conn.send(body[len(body) // 2:])
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["response"]["allowed"] is True
    t = time.time()
    assert server.proc.wait(10) == 0
    assert time.time() - t < 5


def test_worker_threads_are_named_for_top_and_proc(certs):
    s = Server(certs / "tls.crt", certs / "tls.key", certs / "ca.crt", extra_args=["--threads", "2"])
    try:
        names = sorted(open(f"/proc/{s.proc.pid}/task/{t}/comm").read().strip()
                       for t in os.listdir(f"/proc/{s.proc.pid}/task"))
        assert {"https-0", "https-1", "metrics-0"} <= set(names), names
    finally:
        s.stop()
