// Which kubelets a monitor cycle reads. In Deployment mode the node list, read again after
// --node-refresh or when a pod runs on a node it does not name; in DaemonSet mode the one kubelet
// of --node-name (at --kubelet-address, or the Node's own address). Only the nodes that run a pod
// with a /dev/shm are read.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "kube/access.h"
#include "kube/kubelet.h"
#include "monitor/shm_usage.h"
#include "scrape/loop.h"

namespace shmguard::scrape {

class Kubelets {
 public:
  using Clock = std::chrono::steady_clock;
  using Lister = std::function<Result<std::vector<kube::NodeTarget>>()>;

  // `ca`: the kubelets' CA (PEM; "" : the API server's). `list`: every node's kubelet (default:
  // list_kubelets through `api`; the tests give their own).
  Kubelets(const kube::Access& api, const LoopOptions& a, std::string ca, Lister list = {});

  Result<std::vector<kube::NodeTarget>> for_pods(const std::vector<monitor::PodShm>& pods, Clock::time_point now = Clock::now());
  std::uint64_t lists() const { return lists_; }  // node lists read so far

 private:
  bool known(const std::string& node) const;
  Result<std::vector<kube::NodeTarget>> own();

  const kube::Access& api_;
  const LoopOptions& a_;
  const std::string ca_;
  Lister list_;
  std::vector<kube::NodeTarget> nodes_;
  bool read_ = false;
  Clock::time_point read_at_;
  std::uint64_t lists_ = 0;
};

// The nodes of `nodes` that run a pod of `pods` with a /dev/shm, in the order of `nodes`.
std::vector<kube::NodeTarget> nodes_with_shm(const std::vector<kube::NodeTarget>& nodes,
                                             const std::vector<monitor::PodShm>& pods);

}  // namespace shmguard::scrape
