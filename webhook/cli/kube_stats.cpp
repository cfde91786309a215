// Pods and kubelet summaries for top and monitor (see kube_stats.h).
#include "cli/kube_stats.h"

#include <iomanip>
#include <sstream>

#include "base/parallel.h"

namespace shmguard::cli {

using nlohmann::json;

std::string url_encode(const std::string& s) {
  std::ostringstream o;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') o << c;
    else o << '%' << std::uppercase << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(c) << std::dec;
  }
  return o.str();
}

Result<std::vector<monitor::PodShm>> list_shm_pods(const kube::Access& api, const PodQuery& q, int timeout_s) {
  std::string path = q.all_namespaces ? "/api/v1/pods" : "/api/v1/namespaces/" + url_encode(q.namespace_name) + "/pods";
  path += "?fieldSelector=" + url_encode("status.phase=Running");
  if (!q.selector.empty()) path += "&labelSelector=" + url_encode(q.selector);
  auto r = kube::get(api, path, timeout_s, true);
  if (!r) return r.failure_part();
  if (r->status == 403 || r->status == 401)
    return Failure{"cannot list pods: " + kube::error_message(*r) + " (needs `list pods` " +
                   (q.all_namespaces ? std::string("in every namespace (-A)") : "in namespace " + q.namespace_name) + ")"};
  if (r->status != 200) return Failure{"listing pods: HTTP " + std::to_string(r->status) + ": " + kube::error_message(*r)};
  const json list = monitor::parse_pod_list(r->text);
  if (list.is_null()) return Failure{"listing pods: the API server's answer is not JSON"};
  return monitor::shm_pods(list);
}

std::vector<monitor::NodeScrape> read_summaries(const kube::Access& api, const std::vector<NodeTarget>& nodes,
                                                std::vector<monitor::PodShm>& pods, int timeout_s, unsigned threads) {
  std::vector<json> summaries(nodes.size());
  std::vector<monitor::NodeScrape> out(nodes.size());
  parallel_for(nodes.size(), threads, [&](unsigned, std::size_t i) {
    const NodeTarget& n = nodes[i];
    out[i].node = n.name;
    auto r = n.kubelet ? kube::get(*n.kubelet, "/stats/summary", timeout_s, true)
                       : kube::get(api, "/api/v1/nodes/" + url_encode(n.name) + "/proxy/stats/summary", timeout_s, true);
    if (!r) out[i].error = r.error();
    else if (r->status == 403 || r->status == 401)
      out[i].error = kube::error_message(*r) + (n.kubelet ? " (the kubelet wants `get nodes/stats`)"
                                                          : " (needs `get nodes/proxy`: the API server's node proxy)");
    else if (r->status != 200) out[i].error = "HTTP " + std::to_string(r->status) + ": " + kube::error_message(*r);
    else if ((summaries[i] = monitor::parse_summary(r->text)).is_null()) out[i].error = "the summary is not JSON";
  });
  const auto index = monitor::index_pods(pods);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    out[i].ok = out[i].error.empty();
    if (out[i].ok) monitor::apply_summary(pods, index, nodes[i].name, summaries[i]);
  }
  return out;
}

}  // namespace shmguard::cli
