"""`shmguard monitor` keeps its pods from a watch (docs/performance.md): against the fake fleet
(hack/bench/fake_fleet.py: an API server that lists, watches with bookmarks, and answers a too-old
resourceVersion with 410, and kubelets), a pod added or deleted is seen without a new list, a 410
(an ERROR event on the open watch, or HTTP 410 to a new one) makes it list again, and a DaemonSet
agent (--node-name) asks only for its node's pods and its own kubelet."""
import json
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pylib.paths import BIN, SRC

FLEET = SRC / "hack" / "bench" / "fake_fleet.py"


class Fleet:
    def __init__(self, d, *args):
        self.dir = Path(d)
        self.log = open(self.dir / "fleet.out", "w+")
        self.proc = subprocess.Popen([sys.executable, str(FLEET), str(self.dir / "fleet"), *args],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            text = (self.dir / "fleet.out").read_text()
            if m := re.search(r"api port (\d+)", text):
                self.port = int(m.group(1))
                break
            assert self.proc.poll() is None, text
            time.sleep(0.2)
        else:
            raise AssertionError("the fake fleet did not start")
        self.ctx = ssl.create_default_context(cafile=str(self.dir / "fleet" / "ca.crt"))
        self.kubeconfig = str(self.dir / "fleet" / "kubeconfig")
        self.kubelets = json.loads((self.dir / "fleet" / "kubelets.json").read_text())

    def call(self, path, method="GET"):
        req = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", method=method, data=b"" if method == "POST" else None)
        return json.loads(urllib.request.urlopen(req, context=self.ctx, timeout=10).read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Monitor:
    def __init__(self, fleet, d, *args):
        self.port = free_port()
        self.log_path = Path(d) / f"monitor-{self.port}.log"
        self.proc = subprocess.Popen([BIN, "monitor", "--kubeconfig", fleet.kubeconfig, "--listen", f"127.0.0.1:{self.port}",
                                      "--period", "1", "--no-events", *args],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"))

    def metrics(self):
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5).read().decode()
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def value(self, name, m=None):
        m = self.metrics() if m is None else m
        return m.get(name)

    def pods(self, m=None):
        m = self.metrics() if m is None else m
        return {re.search(r'pod="([^"]*)"', k).group(1) for k in m if k.startswith("shmguard_shm_size_bytes{")}

    def wait(self, pred, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.metrics()
            if m and pred(m):
                return m
            assert self.proc.poll() is None, self.log_path.read_text()
            time.sleep(0.3)
        raise AssertionError(f"{what}: not within {timeout}s\n{self.log_path.read_text()[-3000:]}")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        return self.log_path.read_text()


@pytest.fixture()
def fleet(tmp_path):
    f = Fleet(tmp_path, "--nodes", "3", "--pods", "4", "--slow", "0", "--hang", "0", "--bookmark-seconds", "1")
    yield f
    f.stop()


LISTS = "shmguard_monitor_pod_lists_total"


def test_added_and_deleted_pods_are_seen_from_the_watch_without_a_new_list(fleet, tmp_path):
    mon = Monitor(fleet, tmp_path)
    try:
        m = mon.wait(lambda m: len(mon.pods(m)) == 12, "the 12 pods' figures")
        assert m[LISTS] == 1
        lists_before = fleet.call("/fleet/stats")["pod_lists"]
        fleet.call("/fleet/add?node=1&name=late-pod", "POST")
        m = mon.wait(lambda m: "late-pod" in mon.pods(m), "the added pod")
        assert m[LISTS] == 1 and m['shmguard_monitor_watch_events_total{type="ADDED"}'] >= 1
        fleet.call("/fleet/delete?name=train-0-0", "POST")
        m = mon.wait(lambda m: "train-0-0" not in mon.pods(m), "the deleted pod's series gone")
        assert m[LISTS] == 1 and m['shmguard_monitor_watch_events_total{type="DELETED"}'] >= 1
        assert len(mon.pods(m)) == 12
        # Bookmarks (allowWatchBookmarks) move the resourceVersion while nothing changes.
        mon.wait(lambda m: m.get('shmguard_monitor_watch_events_total{type="BOOKMARK"}', 0) >= 1, "a bookmark")
        stats = fleet.call("/fleet/stats")
        assert stats["pod_lists"] == lists_before, "the API server was asked for the pod list again"
        assert stats["node_lists"] == 1  # the node list is read once, not each cycle
        assert m["shmguard_monitor_pods_kept"] == 12
    finally:
        log = mon.stop()
    assert log.count("first list of 12 pods") == 1 and "relist" not in log


def test_410_gone_on_the_open_watch_or_to_a_new_one_lists_again(fleet, tmp_path):
    mon = Monitor(fleet, tmp_path, "--watch-timeout", "2")
    try:
        mon.wait(lambda m: len(mon.pods(m)) == 12, "the 12 pods' figures")
        # The open watch ends with an ERROR event, code 410 (the watch cache's window moved on).
        fleet.call("/fleet/expire?how=event", "POST")
        m = mon.wait(lambda m: m[LISTS] == 2, "a relist after the ERROR 410 event")
        assert m['shmguard_monitor_watch_events_total{type="ERROR"}'] == 1
        fleet.call("/fleet/add?node=2&name=after-relist", "POST")
        mon.wait(lambda m: "after-relist" in mon.pods(m) and m[LISTS] == 2, "a pod added after the relist, from the watch")
        # A new watch from a resourceVersion that is too old is answered 410 Gone (the open one, ended
        # by its timeoutSeconds, comes back with it).
        fleet.call("/fleet/expire?how=status", "POST")
        m = mon.wait(lambda m: m[LISTS] == 3, "a relist after HTTP 410")
        assert len(mon.pods(m)) == 13
    finally:
        log = mon.stop()
    assert log.count("relist of 13 pods") == 1 and log.count("relist of 12 pods") == 1


def test_a_daemonset_agent_watches_its_node_only_and_reads_its_own_kubelet(fleet, tmp_path):
    mon = Monitor(fleet, tmp_path, "--node-name", "node-1", "--kubelet-address", "127.0.0.1",
                  "--kubelet-port", str(fleet.kubelets["node-1"]))
    try:
        m = mon.wait(lambda m: len(mon.pods(m)) == 4, "node-1's 4 pods")
        assert mon.pods(m) == {f"train-1-{p}" for p in range(4)}
        assert [k for k in m if k.startswith("shmguard_node_scrape_errors_total")] == [
            'shmguard_node_scrape_errors_total{node="node-1"}']
        fleet.call("/fleet/add?node=2&name=elsewhere", "POST")
        fleet.call("/fleet/add?node=1&name=here", "POST")
        m = mon.wait(lambda m: "here" in mon.pods(m), "the pod added on its node")
        assert "elsewhere" not in mon.pods(m)
        # Events of other nodes' pods never reach it: the API server filters the watch.
        assert m['shmguard_monitor_watch_events_total{type="ADDED"}'] == 1
        assert fleet.call("/fleet/stats")["node_lists"] == 0  # no node list: it was told where its kubelet is
    finally:
        mon.stop()
