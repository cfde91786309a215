// Which kubelets a cycle reads (see kubelets.h).
#include "scrape/kubelets.h"

#include <algorithm>
#include <unordered_set>

#include "kube/list.h"
#include "scrape/reads.h"

namespace shmguard::scrape {

Kubelets::Kubelets(const kube::Access& api, const LoopOptions& a, std::string ca, Lister list)
    : api_(api), a_(a), ca_(std::move(ca)), list_(std::move(list)) {
  if (!list_) list_ = [this] { return list_kubelets(api_, a_.timeout_s, ca_, a_.kubelet_insecure_tls); };
}

Result<std::vector<kube::NodeTarget>> Kubelets::for_pods(const std::vector<monitor::PodShm>& pods, Clock::time_point now) {
  if (!a_.node_name.empty()) return own();
  bool stale = !read_ || now - read_at_ > std::chrono::seconds(a_.node_refresh_s);
  for (const auto& p : pods)
    if (!stale && !p.volume.empty() && !p.node.empty() && !known(p.node)) stale = true;
  if (stale) {
    auto nodes = list_();
    if (!nodes) return nodes.failure_part();
    nodes_ = std::move(*nodes);
    read_ = true;
    read_at_ = now;
    ++lists_;
  }
  return nodes_;
}

bool Kubelets::known(const std::string& node) const {
  return std::any_of(nodes_.begin(), nodes_.end(), [&](const kube::NodeTarget& n) { return n.name == node; });
}

Result<std::vector<kube::NodeTarget>> Kubelets::own() {
  if (read_) return nodes_;
  std::string address = a_.kubelet_address;
  int port = a_.kubelet_port;
  if (address.empty()) {  // needs `get nodes`: the chart gives the downward API's status.hostIP instead
    auto r = kube::get(api_, "/api/v1/nodes/" + kube::url_encode(a_.node_name), a_.timeout_s, true);
    if (!r) return r.failure_part();
    if (r->status != 200)
      return Failure{"cannot read node " + a_.node_name + ": " + kube::error_message(*r) + " (give --kubelet-address)"};
    const auto found = monitor::kubelet_addresses({{"items", {monitor::parse_node_list(r->text)}}});
    if (found.empty()) return Failure{"node " + a_.node_name + " has no address"};
    address = found[0].address;
    port = found[0].port;
  }
  nodes_ = {{a_.node_name, kube::at_kubelet(api_, address, port, ca_.empty() ? api_.ca_pem : ca_, a_.kubelet_insecure_tls)}};
  read_ = true;
  return nodes_;
}

std::vector<kube::NodeTarget> nodes_with_shm(const std::vector<kube::NodeTarget>& nodes,
                                             const std::vector<monitor::PodShm>& pods) {
  std::unordered_set<std::string> with_shm;
  for (const auto& p : pods)
    if (!p.volume.empty()) with_shm.insert(p.node);
  std::vector<kube::NodeTarget> wanted;
  for (const auto& n : nodes)
    if (with_shm.count(n.name)) wanted.push_back(n);
  return wanted;
}

}  // namespace shmguard::scrape
