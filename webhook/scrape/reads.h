// What `top` and `monitor` read from a cluster, each once: the running pods with a /dev/shm, what
// they are judged against (shmguard's webhook configuration, the namespaces' labels), every
// node's kubelet, and the nodes' Summary API joined into the pods (kube/ does the HTTP; monitor/
// reads the JSON).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/config.h"
#include "kube/access.h"
#include "kube/kubelet.h"
#include "monitor/protection.h"
#include "monitor/shm_usage.h"
#include "monitor/tracker.h"

namespace shmguard::scrape {

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

// Every node's kubelet (the monitor), reached with the API access's credentials and verified
// against `kubelet_ca` (PEM; "" : the API server's CA, as metrics-server) unless `insecure`.
Result<std::vector<kube::NodeTarget>> list_kubelets(const kube::Access& api, int timeout_s, const std::string& kubelet_ca,
                                                    bool insecure);

// One node's summary text (kube::read_summary in the program; the tests give their own).
using SummaryReader = std::function<Result<std::string>(const kube::NodeTarget&)>;
SummaryReader summary_reader(const kube::Access& api, int timeout_s);

// Reads the nodes' summaries (up to `threads` at once, each bounded by the reader's timeout, so a
// dead kubelet stalls nothing) into `pods`; one result per node, with why it failed.
std::vector<monitor::NodeScrape> read_summaries(const SummaryReader& read, const std::vector<kube::NodeTarget>& nodes,
                                                std::vector<monitor::PodShm>& pods, unsigned threads);

}  // namespace shmguard::scrape
