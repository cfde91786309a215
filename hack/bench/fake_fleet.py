#!/usr/bin/env python3
"""A fake fleet for `hack/bench.sh monitor` and the monitor's e2e tests: an API server and N kubelets
on loopback, serving JSON shaped like a real cluster's (pods with managedFields, env, probes and
status; Summary API pods with containers, network, ephemeral storage and three volumes), so that
`shmguard monitor` and `shmguard top -A` do a real cycle's work: TLS, paging, parsing, joining.
Some kubelets are slow and some never answer.

The API server lists pods in pages (fieldSelector spec.nodeName too, as a DaemonSet agent asks) and
watches them as the real one does: `?watch=1&resourceVersion=R` streams ADDED/MODIFIED/DELETED
events after R (chunked, one JSON object a line), BOOKMARKs with allowWatchBookmarks, ends after
timeoutSeconds, and answers an R older than the events it keeps with an ERROR 410 event (or, with
/fleet/expire?how=status, HTTP 410). --churn N modifies N pods a second (a status update each). A
control API drives the tests: POST /fleet/add?node=N&name=X, /fleet/delete?name=X, /fleet/expire
(every resourceVersion so far becomes too old: the open watches end with an ERROR 410 event and a
new one from an older resourceVersion gets one; with ?how=status the open ones are cut and a new
one is answered HTTP 410), GET
/fleet/stats (bytes the API server and the kubelets served, lists and watches started). Writes
DIR/kubeconfig and prints `ready` when it listens.

usage: fake_fleet.py DIR [--nodes 200] [--pods 50] [--slow 5] [--slow-seconds 3] [--hang 1] [--churn 0]
                         [--bookmark-seconds 60]"""
import argparse
import asyncio
import json
import resource
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


class Stream:
    """A route's answer that is written as it comes: `run(write)` writes chunks until it returns."""
    def __init__(self, run):
        self.run = run


async def serve(reader, writer, route, counter):
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
            if isinstance(body, Stream):
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                writer.write(head)
                counter[0] += len(head)

                async def write(chunk):
                    data = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
                    counter[0] += len(data)
                    writer.write(data)
                    await writer.drain()
                await body.run(write)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                continue
            counter[0] += len(body)
            writer.write(body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


class Pods:
    """The pods, each kept with its JSON encoding (a page is a join of them), its node and resourceVersion,
    and the events after `oldest` for watches."""
    def __init__(self, nodes, per_node):
        self.rv = 200000
        self.oldest = self.rv  # a watch from before this is too old (410)
        self.items = {}        # name -> (node, its JSON, the object)
        self.order = []        # names in list order
        self.by_node = {}      # node -> [names]
        self.events = []       # (rv, node, line bytes), after `oldest`
        self.watchers = set()  # asyncio.Queue of each open watch
        for n in range(nodes):
            for p in range(per_node):
                self.put(pod(n, p), n, event=None)
        self.oldest = self.rv

    def put(self, obj, n, event="ADDED"):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        name = obj["metadata"]["name"]
        if name not in self.items:
            self.order.append(name)
            self.by_node.setdefault(n, []).append(name)
        self.items[name] = (n, json.dumps(obj).encode(), obj)
        if event:
            self.publish(event, n, obj)

    def delete(self, name):
        n, _, obj = self.items.pop(name)
        self.order.remove(name)
        self.by_node[n].remove(name)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.publish("DELETED", n, obj)

    def publish(self, type_, n, obj):
        line = json.dumps({"type": type_, "object": obj}).encode() + b"\n"
        self.events.append((self.rv, n, line))
        if len(self.events) > 100000:
            self.events = self.events[-50000:]
            self.oldest = self.events[0][0] - 1
        for q in list(self.watchers):
            q.put_nowait((self.rv, n, line))

    def names(self, node):
        return self.order if node is None else self.by_node.get(node, [])


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=50)
    ap.add_argument("--slow", type=int, default=5)
    ap.add_argument("--slow-seconds", type=float, default=3.0)
    ap.add_argument("--hang", type=int, default=1)
    ap.add_argument("--churn", type=float, default=0, help="pods modified per second")
    ap.add_argument("--bookmark-seconds", type=float, default=60)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    certs(d)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "tls.crt", d / "tls.key")
    api_bytes, kubelet_bytes = [0], [0]
    stats = {"pod_lists": 0, "pod_list_pages": 0, "watches": 0, "node_lists": 0, "events_posted": 0, "summaries": 0}

    # Which nodes misbehave: the last `hang` never answer, the `slow` before them take slow-seconds.
    def behaviour(n):
        if n >= a.nodes - a.hang:
            return None
        return a.slow_seconds if n >= a.nodes - a.hang - a.slow else 0

    store = Pods(a.nodes, a.pods)
    summaries = {}  # node -> response bytes, rebuilt when its pods change

    def node_summary(n):
        if n not in summaries:
            body = summary(n, a.pods, 0)
            have = {store.items[name][2]["metadata"]["uid"]: store.items[name][2] for name in store.names(n)}
            body["pods"] = [ps for ps in body["pods"] if ps["podRef"]["uid"] in have]
            known = {ps["podRef"]["uid"] for ps in body["pods"]}
            for uid, obj in have.items():  # pods added since: the same figures as the first
                if uid not in known:
                    ps = json.loads(json.dumps(summary(n, 1, 0)["pods"][0]))
                    ps["podRef"] = {"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"], "uid": uid}
                    body["pods"].append(ps)
            summaries[n] = response("200 OK", json.dumps(body).encode())
        return summaries[n]

    kubelet_servers, ports = [], []
    for n in range(a.nodes):
        def kubelet_route(method, target, n=n):
            if urlsplit(target).path == "/stats/summary":
                stats["summaries"] += 1
                return behaviour(n), node_summary(n)
            return 0, response("404 Not Found", b"404")
        srv = await asyncio.start_server(lambda r, w, route=kubelet_route: serve(r, w, route, kubelet_bytes),
                                         "127.0.0.1", 0, ssl=ctx, backlog=256)
        kubelet_servers.append(srv)
        ports.append(srv.sockets[0].getsockname()[1])
    nodes = [node(n, ports[n]) for n in range(a.nodes)]
    node_bytes = [json.dumps(x).encode() for x in nodes]
    expire_how = ["event"]

    def selected_node(q):
        for sel in q.get("fieldSelector", [""])[0].split(","):
            if sel.startswith("spec.nodeName="):
                name = sel.split("=", 1)[1]
                return int(name.split("-")[1]) if name.startswith("node-") else -1
        return None

    def list_page(encoded, q, kind):
        limit = int(q.get("limit", [PAGE_DEFAULT])[0]) or len(encoded)
        start = int(q.get("continue", ["0"])[0])
        md = {"resourceVersion": str(store.rv)}
        if start + limit < len(encoded):
            md["continue"] = str(start + limit)
        body = (b'{"kind":"' + kind.encode() + b'","apiVersion":"v1","metadata":' + json.dumps(md).encode() +
                b',"items":[' + b",".join(encoded[start:start + limit]) + b"]}")
        return response("200 OK", body)

    def watch(q):
        since = int(q.get("resourceVersion", ["0"])[0] or store.rv)
        node_filter = selected_node(q)
        timeout = float(q.get("timeoutSeconds", ["1800"])[0])
        bookmarks = q.get("allowWatchBookmarks", ["false"])[0] == "true"
        stats["watches"] += 1
        if since < store.oldest and expire_how[0] == "status":
            return 0, response("410 Gone", json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                       "message": f"too old resource version: {since} ({store.oldest})",
                                                       "reason": "Expired", "code": 410}).encode())

        def gone(rv):
            return json.dumps({"type": "ERROR", "object": {
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
                "message": f"too old resource version: {rv} ({store.oldest})"}}).encode() + b"\n"

        async def run(write):
            if since < store.oldest:
                await write(gone(since))
                return
            q_ = asyncio.Queue()
            store.watchers.add(q_)
            try:
                for rv, n, line in store.events:
                    if rv > since and (node_filter is None or n == node_filter):
                        await write(line)
                loop = asyncio.get_running_loop()
                end = loop.time() + timeout
                next_bookmark = loop.time() + a.bookmark_seconds
                while True:
                    now = loop.time()
                    if now >= end:
                        return
                    try:
                        rv, n, line = await asyncio.wait_for(q_.get(), min(end, next_bookmark) - now)
                    except asyncio.TimeoutError:
                        if bookmarks and loop.time() >= next_bookmark:
                            await write(json.dumps({"type": "BOOKMARK", "object": {
                                "kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(store.rv)}}}).encode() + b"\n")
                            next_bookmark = loop.time() + a.bookmark_seconds
                        continue
                    if rv == -1:  # expired while open
                        await write(gone(since))
                        return
                    if rv == -2:  # cut
                        raise ConnectionError("cut")
                    if node_filter is None or n == node_filter:
                        await write(line)
            finally:
                store.watchers.discard(q_)
        return 0, Stream(run)

    def control(u, q):
        if u.path == "/fleet/stats":
            return response("200 OK", json.dumps({"api_bytes": api_bytes[0], "kubelet_bytes": kubelet_bytes[0],
                                                  "resource_version": store.rv, "pods": len(store.items), **stats}).encode())
        if u.path == "/fleet/add":
            n = int(q["node"][0])
            obj = pod(n, 0)
            name = q["name"][0]
            obj["metadata"]["name"] = name
            obj["metadata"]["uid"] = "uid-" + name
            store.put(obj, n)
            summaries.pop(n, None)
        elif u.path == "/fleet/delete":
            n = store.items[q["name"][0]][0]
            store.delete(q["name"][0])
            summaries.pop(n, None)
        elif u.path == "/fleet/expire":
            expire_how[0] = q.get("how", ["event"])[0]
            store.rv += 1
            store.oldest = store.rv  # every resourceVersion handed out so far is too old now
            store.events = []
            # The open watches end with an ERROR 410 event; with status they are cut, and come back
            # from their resourceVersion to an HTTP 410.
            for w in list(store.watchers):
                w.put_nowait((-1 if expire_how[0] == "event" else -2, None, b""))
        else:
            return response("404 Not Found", b'{"message":"not found"}')
        return response("200 OK", json.dumps({"resource_version": store.rv}).encode())

    def api_route(method, target):
        u = urlsplit(target)
        q = parse_qs(u.query)
        parts = u.path.strip("/").split("/")
        if u.path.startswith("/fleet/"):
            return 0, control(u, q)
        if method == "POST" and u.path.endswith("/events"):
            stats["events_posted"] += 1
            return 0, response("201 Created", b'{"kind":"Event"}')
        if u.path == "/api/v1/nodes":
            stats["node_lists"] += 1
            return 0, list_page(node_bytes, q, "NodeList")
        if len(parts) == 4 and parts[:3] == ["api", "v1", "nodes"]:
            n = int(parts[3].split("-")[1])
            return 0, response("200 OK", node_bytes[n])
        if u.path == "/api/v1/pods":
            if q.get("watch", ["0"])[0] in ("1", "true"):
                return watch(q)
            stats["pod_list_pages"] += 1
            if "continue" not in q:
                stats["pod_lists"] += 1
            sel = selected_node(q)
            return 0, list_page([store.items[name][1] for name in store.names(sel)], q, "PodList")
        if len(parts) == 7 and parts[:3] == ["api", "v1", "nodes"] and parts[4:] == ["proxy", "stats", "summary"]:
            n = int(parts[3].split("-")[1])
            b = behaviour(n)
            # The API server's proxy gives up on a dead kubelet after its dial timeout, with a 503.
            return (b, node_summary(n)) if b is not None else (30, response("503 Service Unavailable", b'{"message":"dial timeout"}'))
        return 0, response("404 Not Found", b'{"message":"not found"}')

    async def churn():
        i = 0
        while True:
            await asyncio.sleep(1 / a.churn)
            name = store.order[i % len(store.order)]
            n, _, obj = store.items[name]
            obj["status"]["conditions"][0]["lastProbeTime"] = f"2026-12-02T10:{i // 60 % 60:02d}:{i % 60:02d}Z"
            store.put(obj, n, event="MODIFIED")
            i += 1 + 7919  # a spread of nodes

    api = await asyncio.start_server(lambda r, w: serve(r, w, api_route, api_bytes), "127.0.0.1", 0, ssl=ctx, backlog=256)
    api_port = api.sockets[0].getsockname()[1]
    if a.churn > 0:
        asyncio.ensure_future(churn())
    (d / "kubeconfig").write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fleet",
        "clusters": [{"name": "fleet", "cluster": {"server": f"https://127.0.0.1:{api_port}",
                                                   "certificate-authority": str(d / "ca.crt")}}],
        "users": [{"name": "bench", "user": {"token": "fleet-token"}}],
        "contexts": [{"name": "fleet", "context": {"cluster": "fleet", "user": "bench"}}]}))
    for n in range(a.nodes):  # built once: the fake's own JSON encoding is not what is measured
        node_summary(n)
    (d / "kubelets.json").write_text(json.dumps({f"node-{n}": ports[n] for n in range(a.nodes)}))
    encoded = [store.items[name][1] for name in store.order]
    one_list = sum(len(list_page(encoded, {"continue": [str(s)]}, "PodList"))
                   for s in range(0, len(encoded), PAGE_DEFAULT))
    print(f"ready: {a.nodes} kubelets ({a.slow} answer after {a.slow_seconds:g}s, {a.hang} never), "
          f"{len(store.items)} pods; the pod list is {one_list / 1e6:.1f} MB, a summary {len(node_summary(0)) / 1e3:.0f} KB, "
          f"a node {len(node_bytes[0]) / 1e3:.1f} KB; api port {api_port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
