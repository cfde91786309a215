// A node's Summary API (see kubelet.h).
#include "kube/kubelet.h"

#include "kube/list.h"

namespace shmguard::kube {

Result<std::string> read_summary(const Access& api, const NodeTarget& n, int timeout_s) {
  auto r = n.kubelet ? get(*n.kubelet, "/stats/summary", timeout_s, true)
                     : get(api, "/api/v1/nodes/" + url_encode(n.name) + "/proxy/stats/summary", timeout_s, true);
  if (!r) return r.failure_part();
  if (r->status == 403 || r->status == 401)
    return Failure{error_message(*r) + (n.kubelet ? " (the kubelet wants `get nodes/stats`)"
                                                  : " (needs `get nodes/proxy`: the API server's node proxy)")};
  if (r->status != 200) return Failure{"HTTP " + std::to_string(r->status) + ": " + error_message(*r)};
  return std::move(r->text);
}

}  // namespace shmguard::kube
