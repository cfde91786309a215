// Where `top` and `monitor` get their figures: the running pods with a /dev/shm from the API
// server, and each node's Summary API, through the API server's node proxy (top, with the user's
// `nodes/proxy`) or from the kubelet itself (monitor, with `nodes/stats`, as metrics-server does).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/config.h"
#include "kube/access.h"
#include "monitor/shm_usage.h"
#include "monitor/tracker.h"

namespace shmguard::cli {

struct PodQuery {
  bool all_namespaces = false;
  std::string namespace_name;
  std::string selector;
};

// The running pods that mount a Memory emptyDir at /dev/shm and, with a `judge`, the ones it finds
// unprotected.
Result<std::vector<monitor::PodShm>> list_pods(const kube::Access& api, const PodQuery& q, int timeout_s,
                                               const monitor::Judge* judge);

// What pods are judged against (monitor/protection.h): shmguard's MutatingWebhookConfiguration
// `configuration` ("" : the one labelled app.kubernetes.io/name=shmguard) and the labels of the
// namespaces `q` covers. What cannot be read is said in the webhook view's error, never a failure:
// the pods are then reported unprotected without a known reason.
monitor::Judge load_judge(const kube::Access& api, const config::Config& cfg, const std::string& configuration,
                          const PodQuery& q, int timeout_s);

struct NodeTarget {
  std::string name;
  std::optional<kube::Access> kubelet;  // set: ask the kubelet itself; unset: the API server's node proxy
};

// Every node's kubelet (the monitor), reached with the API access's credentials and verified
// against `kubelet_ca` (PEM; "" : the API server's CA, as metrics-server) unless `insecure`.
Result<std::vector<NodeTarget>> list_kubelets(const kube::Access& api, int timeout_s, const std::string& kubelet_ca,
                                              bool insecure);

// Reads the nodes' summaries (up to `threads` at once, each bounded by `timeout_s`, so a dead
// kubelet stalls nothing) into `pods`; one result per node, with why it failed.
std::vector<monitor::NodeScrape> read_summaries(const kube::Access& api, const std::vector<NodeTarget>& nodes,
                                                std::vector<monitor::PodShm>& pods, int timeout_s, unsigned threads);

std::string url_encode(const std::string& s);

}  // namespace shmguard::cli
