// The monitor's loop (`shmguard monitor`): the chart's optional Deployment (monitor.enabled), or
// with --node-name one agent per node (monitor.mode: daemonset). It keeps the running pods from a
// watch (a list, then a watch from its resourceVersion: pod_watcher.h; the agent's is
// field-selected to its node), and on a period reads the kubelets' Summary API in parallel
// (`nodes/stats`, as metrics-server does; the agent reads its own kubelet only: kubelets.h), keeps
// each pod's peak while it lives, serves Prometheus metrics, and writes an Event on a pod the first
// time its /dev/shm reaches 90% (events.h).
// Every running pod is judged by the engine once per version of it: a training pod without the
// /dev/shm shmguard would give it is reported unprotected, with why (monitor/protection.h), in the
// metrics and an Event.
#pragma once

#include <string>

#include "base/result.h"
#include "config/config.h"

namespace shmguard::scrape {

struct LoopOptions {
  std::string kubeconfig, context;     // default: in-cluster
  std::string listen = "0.0.0.0:9090";  // /metrics and /healthz (plain HTTP)
  int period_s = 30;                    // between cycles (the kubelet refreshes volume stats every 1m by default)
  int timeout_s = 5;                    // per kubelet
  unsigned parallel = 32;               // kubelets read at once
  std::string kubelet_ca;               // PEM file the kubelets' serving certificates chain to
  bool kubelet_insecure_tls = false;    // do not verify them (self-signed kubelet certificates)
  bool events = true;                   // write the 90% and the unprotected Events
  std::string webhook_configuration;    // shmguard's MutatingWebhookConfiguration ("" : by its label)
  int cycles = 0;                       // stop after this many (tests); 0: run until SIGTERM
  // DaemonSet mode: this node's pods (fieldSelector spec.nodeName) and its kubelet only, at
  // `kubelet_address` (the downward API's status.hostIP; "" : the Node's address, which needs `get nodes`).
  std::string node_name, kubelet_address;
  int kubelet_port = 10250;
  int node_refresh_s = 300;             // Deployment mode: the node list is read again after this long
  int watch_timeout_s = 300;            // the pod watch's timeoutSeconds
};

// Runs until SIGTERM or SIGINT (or `cycles`); the failure says why it could not start (flags,
// kubeconfig, --kubelet-ca, --listen).
Status run_monitor(const LoopOptions& a, const config::Config& cfg);

}  // namespace shmguard::scrape
