// A node's Summary API (`/stats/summary`): from the kubelet itself (the monitor, with
// `nodes/stats`, as metrics-server reads it) or through the API server's node proxy (top, with the
// user's `nodes/proxy`).
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "kube/access.h"

namespace shmguard::kube {

struct NodeTarget {
  std::string name;
  std::optional<Access> kubelet;  // set: ask the kubelet itself; unset: the API server's node proxy
};

// The summary's text; a failure says why, and for a 401/403 which permission is wanted.
Result<std::string> read_summary(const Access& api, const NodeTarget& node, int timeout_s);

}  // namespace shmguard::kube
