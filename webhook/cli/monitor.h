// `shmguard monitor`: the chart's optional Deployment (monitor.enabled). On a period it lists the
// nodes and the running pods with a /dev/shm, reads every kubelet's Summary API in parallel
// (`nodes/stats`, as metrics-server does), keeps each pod's peak while it lives, serves Prometheus
// metrics, and writes an Event on a pod the first time its /dev/shm reaches 90%.
#pragma once

#include <string>

#include "config/config.h"

namespace shmguard::cli {

struct MonitorArgs {
  std::string kubeconfig, context;     // default: in-cluster
  std::string listen = "0.0.0.0:9090";  // /metrics and /healthz (plain HTTP)
  int period_s = 30;                    // between cycles (the kubelet refreshes volume stats every 1m by default)
  int timeout_s = 5;                    // per kubelet
  unsigned parallel = 32;               // kubelets read at once
  std::string kubelet_ca;               // PEM file the kubelets' serving certificates chain to
  bool kubelet_insecure_tls = false;    // do not verify them (self-signed kubelet certificates)
  bool events = true;                   // write the 90% Event
  int cycles = 0;                       // stop after this many (tests); 0: run until SIGTERM
};

int run_monitor(const MonitorArgs& a, const config::Config& cfg);

}  // namespace shmguard::cli
