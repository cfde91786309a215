#!/usr/bin/env python3
"""A fake fleet for `hack/bench.sh monitor`: an API server and N kubelets on loopback, serving
pre-built JSON shaped like a real cluster's (pods with managedFields, env, probes and status; Summary
API pods with containers, network, ephemeral storage and three volumes), so that `shmguard monitor`
and `shmguard top -A` do a real cycle's work: TLS, paging, parsing, joining. Some kubelets are slow
and some never answer. Writes DIR/kubeconfig and prints `ready` when it listens.

usage: fake_fleet.py DIR [--nodes 200] [--pods 50] [--slow 5] [--slow-seconds 3] [--hang 1]"""
import argparse
import asyncio
import json
import ssl
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

PAGE_DEFAULT = 500


def certs(d):
    """A CA and one serving certificate for 127.0.0.1 (the API server and every kubelet)."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
        f"{d}/ca.key", "-out", f"{d}/ca.crt", "-days", "1", "-subj", "/CN=fake-fleet-ca")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{d}/tls.key",
        "-out", f"{d}/tls.csr", "-subj", "/CN=fake-fleet")
    Path(f"{d}/ext.cnf").write_text("[ext]\nsubjectAltName = IP:127.0.0.1\nextendedKeyUsage = serverAuth\n")
    run("x509", "-req", "-in", f"{d}/tls.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key", "-CAcreateserial",
        "-out", f"{d}/tls.crt", "-days", "1", "-extfile", f"{d}/ext.cnf", "-extensions", "ext")


def pod(n, p):
    name = f"train-{n}-{p}"
    env = [{"name": f"VAR_{i}", "value": f"value-{i}-" + "x" * 20} for i in range(20)]
    return {
        "metadata": {
            "name": name, "namespace": f"ml-{p % 10}", "uid": f"5f1c{n:04d}-{p:04d}-4a8e-9d1b-2c6f0e7a{n:04d}",
            "resourceVersion": str(100000 + n * 100 + p), "creationTimestamp": "2026-12-01T10:00:00Z",
            "labels": {"batch.kubernetes.io/job-name": f"js-{p}-workers-0", "jobset.sigs.k8s.io/jobset-name": f"js-{p}",
                       "batch.kubernetes.io/controller-uid": "0c4e" * 8, "app": "train"},
            "annotations": {"shmguard.io/sizing": "(W 8 x P 2 + 1) x batch 32 x 588Ki x procs 8 x 1.25 = 27563Mi",
                            "kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 600 + "}"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"js-{p}-workers-0",
                                 "uid": "0c4e" * 8, "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {f"f:l{i}": {} for i in range(12)}},
                                            "f:spec": {f"f:c{i}": {} for i in range(30)}}},
                              {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "subresource": "status",
                               "time": "2026-12-01T10:00:05Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:status": {f"f:s{i}": {} for i in range(20)}}}]},
        "spec": {
            "nodeName": f"node-{n}", "restartPolicy": "Never", "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "containers": [{
                "name": "train", "image": "ghcr.io/acme/llm-trainer:2026.11.3",
                "command": ["torchrun", "--nproc_per_node=8", "train.py", "--batch-size", "32", "--num-workers", "8"],
                "env": env,
                "resources": {"limits": {"nvidia.com/gpu": "8", "memory": "512Gi"},
                              "requests": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}},
                "volumeMounts": [{"name": "shmguard-dshm", "mountPath": "/dev/shm"},
                                 {"name": "data", "mountPath": "/data"},
                                 {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                  "readOnly": True}],
                "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 10},
                "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "dataset"}},
                        {"name": "shmguard-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "27563Mi"}},
                        {"name": "kube-api-access", "projected": {"sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]},
        "status": {
            "phase": "Running", "hostIP": f"10.0.{n // 250}.{n % 250}", "podIP": f"10.244.{n}.{p}",
            "startTime": "2026-12-01T10:00:01Z",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-12-01T10:00:05Z"}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": "train", "ready": True, "restartCount": 0, "started": True,
                                   "image": "ghcr.io/acme/llm-trainer:2026.11.3",
                                   "imageID": "ghcr.io/acme/llm-trainer@sha256:" + "ab" * 32,
                                   "containerID": "containerd://" + "cd" * 32,
                                   "state": {"running": {"startedAt": "2026-12-01T10:00:04Z"}}}]}}


def node(n, port):
    return {"metadata": {"name": f"node-{n}", "labels": {"kubernetes.io/hostname": f"node-{n}",
                                                         "nvidia.com/gpu.product": "H100-SXM"}},
            "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": f"node-{n}"}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                       "capacity": {"cpu": "224", "memory": "2Ti", "nvidia.com/gpu": "8"},
                       "conditions": [{"type": t, "status": "False", "reason": "Fine", "message": "m" * 40}
                                      for t in ("MemoryPressure", "DiskPressure", "PIDPressure")],
                       "images": [{"names": [f"ghcr.io/acme/image-{i}@sha256:" + "ef" * 32, f"ghcr.io/acme/image-{i}:1"],
                                   "sizeBytes": 1 << 30} for i in range(40)]}}


def summary(n, pods, cycle_used):
    def container(name):
        return {"name": name, "startTime": "2026-12-01T10:00:04Z",
                "cpu": {"time": "2026-12-02T10:00:00Z", "usageNanoCores": 63000000000, "usageCoreNanoSeconds": 10**15},
                "memory": {"time": "2026-12-02T10:00:00Z", "availableBytes": 1 << 38, "usageBytes": 1 << 38,
                           "workingSetBytes": 1 << 38, "rssBytes": 1 << 37, "pageFaults": 123456, "majorPageFaults": 12},
                "rootfs": {"time": "2026-12-02T10:00:00Z", "availableBytes": 1 << 40, "capacityBytes": 1 << 41,
                           "usedBytes": 1 << 20, "inodesFree": 10**8, "inodes": 2 * 10**8, "inodesUsed": 30},
                "logs": {"time": "2026-12-02T10:00:00Z", "availableBytes": 1 << 40, "capacityBytes": 1 << 41,
                         "usedBytes": 1 << 24, "inodesFree": 10**8, "inodes": 2 * 10**8, "inodesUsed": 3}}
    out = []
    for p in range(pods):
        cap = 27563 << 20
        used = ((p * 7 + cycle_used) % 95) * cap // 100
        out.append({
            "podRef": {"name": f"train-{n}-{p}", "namespace": f"ml-{p % 10}",
                       "uid": f"5f1c{n:04d}-{p:04d}-4a8e-9d1b-2c6f0e7a{n:04d}"},
            "startTime": "2026-12-01T10:00:01Z", "containers": [container("train")],
            "cpu": {"time": "2026-12-02T10:00:00Z", "usageNanoCores": 63000000000, "usageCoreNanoSeconds": 10**15},
            "memory": {"time": "2026-12-02T10:00:00Z", "usageBytes": 1 << 38, "workingSetBytes": 1 << 38,
                       "rssBytes": 1 << 37, "pageFaults": 0, "majorPageFaults": 0},
            "network": {"time": "2026-12-02T10:00:00Z", "name": "eth0", "rxBytes": 10**12, "rxErrors": 0,
                        "txBytes": 10**12, "txErrors": 0,
                        "interfaces": [{"name": "eth0", "rxBytes": 10**12, "rxErrors": 0, "txBytes": 10**12, "txErrors": 0}]},
            "volume": [
                {"time": "2026-12-02T10:00:00Z", "availableBytes": 1 << 40, "capacityBytes": 1 << 41, "usedBytes": 1 << 39,
                 "inodesFree": 10**8, "inodes": 2 * 10**8, "inodesUsed": 10**6, "name": "data",
                 "pvcRef": {"name": "dataset", "namespace": f"ml-{p % 10}"}},
                {"time": "2026-12-02T10:00:00Z", "availableBytes": cap - used, "capacityBytes": cap, "usedBytes": 0,
                 "inodesFree": 10**6, "inodes": 10**6, "inodesUsed": 1, "name": "shmguard-dshm"},
                {"time": "2026-12-02T10:00:00Z", "availableBytes": 1 << 34, "capacityBytes": 1 << 34, "usedBytes": 12288,
                 "inodesFree": 10**6, "inodes": 10**6, "inodesUsed": 9, "name": "kube-api-access"}],
            "ephemeral-storage": {"time": "2026-12-02T10:00:00Z", "availableBytes": 1 << 40, "capacityBytes": 1 << 41,
                                  "usedBytes": 1 << 25, "inodesFree": 10**8, "inodes": 2 * 10**8, "inodesUsed": 40},
            "process_stats": {"process_count": 42}})
    return {"node": {"nodeName": f"node-{n}", "startTime": "2026-11-01T00:00:00Z",
                     "cpu": {"time": "2026-12-02T10:00:00Z", "usageNanoCores": 200 * 10**9},
                     "memory": {"time": "2026-12-02T10:00:00Z", "workingSetBytes": 1 << 40}}, "pods": out}


def response(status, body, ctype="application/json"):
    return (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def serve(reader, writer, route):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            length = 0
            for h in lines[1:]:
                if h.lower().startswith("content-length:"):
                    length = int(h.split(":", 1)[1])
            if length:
                await reader.readexactly(length)
            delay, body = route(method, target)
            if delay is None:  # a kubelet that never answers
                await asyncio.Event().wait()
            if delay:
                await asyncio.sleep(delay)
            writer.write(body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=50)
    ap.add_argument("--slow", type=int, default=5)
    ap.add_argument("--slow-seconds", type=float, default=3.0)
    ap.add_argument("--hang", type=int, default=1)
    a = ap.parse_args()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    certs(d)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "tls.crt", d / "tls.key")

    # Which nodes misbehave: the last `hang` never answer, the `slow` before them take slow-seconds.
    def behaviour(n):
        if n >= a.nodes - a.hang:
            return None
        return a.slow_seconds if n >= a.nodes - a.hang - a.slow else 0

    summaries = [response("200 OK", json.dumps(summary(n, a.pods, 0)).encode()) for n in range(a.nodes)]
    pods = [pod(n, p) for n in range(a.nodes) for p in range(a.pods)]
    kubelet_servers, ports = [], []
    for n in range(a.nodes):
        def kubelet_route(method, target, n=n):
            if urlsplit(target).path == "/stats/summary":
                return behaviour(n), summaries[n]
            return 0, response("404 Not Found", b"404")
        srv = await asyncio.start_server(lambda r, w, route=kubelet_route: serve(r, w, route), "127.0.0.1", 0, ssl=ctx,
                                         backlog=256)
        kubelet_servers.append(srv)
        ports.append(srv.sockets[0].getsockname()[1])
    nodes = [node(n, ports[n]) for n in range(a.nodes)]

    pages = {}  # built once: the fake's own JSON encoding is not what is measured

    def page(items, query, kind):
        if (kind, query) not in pages:
            pages[(kind, query)] = build_page(items, query, kind)
        return pages[(kind, query)]

    def build_page(items, query, kind):
        q = parse_qs(query)
        limit = int(q.get("limit", [PAGE_DEFAULT])[0]) or len(items)
        start = int(q.get("continue", ["0"])[0])
        md = {"resourceVersion": "1"}
        if start + limit < len(items):
            md["continue"] = str(start + limit)
        body = json.dumps({"kind": kind, "apiVersion": "v1", "metadata": md, "items": items[start:start + limit]}).encode()
        return response("200 OK", body)

    def api_route(method, target):
        u = urlsplit(target)
        parts = u.path.strip("/").split("/")
        if method == "POST" and u.path.endswith("/events"):
            return 0, response("201 Created", b'{"kind":"Event"}')
        if u.path == "/api/v1/nodes":
            return 0, page(nodes, u.query, "NodeList")
        if u.path == "/api/v1/pods":
            return 0, page(pods, u.query, "PodList")
        if len(parts) == 7 and parts[:3] == ["api", "v1", "nodes"] and parts[4:] == ["proxy", "stats", "summary"]:
            n = int(parts[3].split("-")[1])
            b = behaviour(n)
            # The API server's proxy gives up on a dead kubelet after its dial timeout, with a 503.
            return (b, summaries[n]) if b is not None else (30, response("503 Service Unavailable", b'{"message":"dial timeout"}'))
        return 0, response("404 Not Found", b'{"message":"not found"}')

    api = await asyncio.start_server(lambda r, w: serve(r, w, api_route), "127.0.0.1", 0, ssl=ctx, backlog=256)
    api_port = api.sockets[0].getsockname()[1]
    (d / "kubeconfig").write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fleet",
        "clusters": [{"name": "fleet", "cluster": {"server": f"https://127.0.0.1:{api_port}",
                                                   "certificate-authority": str(d / "ca.crt")}}],
        "users": [{"name": "bench", "user": {"token": "fleet-token"}}],
        "contexts": [{"name": "fleet", "context": {"cluster": "fleet", "user": "bench"}}]}))
    one_list = sum(len(build_page(pods, f"limit={PAGE_DEFAULT}&continue={s}", "PodList"))
                   for s in range(0, len(pods), PAGE_DEFAULT))
    print(f"ready: {a.nodes} kubelets ({a.slow} answer after {a.slow_seconds:g}s, {a.hang} never), "
          f"{len(pods)} pods; the pod list is {one_list / 1e6:.1f} MB, a summary {len(summaries[0]) / 1e3:.0f} KB, "
          f"a node {len(json.dumps(nodes[0])) / 1e3:.1f} KB", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
