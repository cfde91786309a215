// `shmguard top` (also `kubectl shmguard top`): how full each running pod's /dev/shm is, read from
// the kubelets' Summary API through the API server's node proxy with the user's kubeconfig; and
// which training pods have no /dev/shm from shmguard, and why (monitor/protection.h).
#pragma once

#include <string>

#include "config/config.h"

namespace shmguard::cli {

struct TopArgs {
  std::string kubeconfig, context;
  std::string namespace_name;  // "" : the context's namespace, else "default"
  bool all_namespaces = false;
  std::string selector;        // -l
  std::string watch;           // a duration: sample for this long and show the peak too
  int interval_s = 10;         // between samples with --watch (the kubelet refreshes volume stats each minute)
  std::string output = "table";
  int timeout_s = 10;          // per request
  std::string webhook_configuration;  // shmguard's MutatingWebhookConfiguration ("" : by its label)
};

// `cfg`: the formula's headroom and min, for the suggestion.
int run_top(const TopArgs& a, const config::Config& cfg);

}  // namespace shmguard::cli
