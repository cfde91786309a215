// The webhook's owner lookup (docs/operators.md "Kubeflow Trainer"): the shmguard.io/ annotations of the
// JobSet a pod belongs to, for pods that carry none of their own. A TrainJob's spec.annotations
// reach its JobSet and stop there, so this is where a TrainJob user's hints are read.
//
// One GET per JobSet per cache period, each waiting at most the configured timeout; a failure is
// cached for a few seconds too, so the hundred pods of one JobSet never each wait out a timeout
// while the API server is unwell. It asks for one thing only: `get` on jobsets.jobset.x-k8s.io.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "admission/review.h"
#include "base/result.h"
#include "config/config.h"
#include "kube/access.h"

namespace shmguard::server {

// JobSet's API path for `name` in `ns` (jobset.x-k8s.io/v1alpha2, JobSet v0.8's only version).
std::string jobset_path(const std::string& ns, const std::string& name);

// What a JobSet answer means for its pods: its shmguard.io/ annotations, or why there are none.
// `status`/`body`: the API server's answer; `transport_error`: "" when there was one.
admission::OwnerAnnotations read_jobset_answer(const std::string& ns, const std::string& name, int status,
                                               const nlohmann::json& body, const std::string& transport_error);

class OwnerLookup {
 public:
  using Clock = std::chrono::steady_clock;
  // How to reach the API server, re-read at every miss (a projected token is rotated in place).
  using AccessSource = std::function<Result<kube::Access>()>;
  // The GET itself (kube::get_within); a test gives its own.
  using Getter = std::function<Result<kube::Response>(const kube::Access&, const std::string& path, long timeout_ms)>;

  explicit OwnerLookup(AccessSource access, Getter get = kube::get_within);

  admission::OwnerAnnotations lookup(const std::string& ns, const std::string& jobset,
                                     const config::OwnerLookupConfig& cfg);

  // For tests: the clock the cache reads.
  void set_clock(std::function<Clock::time_point()> now) { now_ = std::move(now); }

 private:
  struct Entry {
    admission::OwnerAnnotations answer;
    Clock::time_point expires;
  };
  static constexpr std::size_t kMaxEntries = 4096;  // then the expired ones go, else all
  static constexpr std::chrono::seconds kFailureTtl{5};

  AccessSource access_;
  Getter get_;
  std::function<Clock::time_point()> now_ = [] { return Clock::now(); };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace shmguard::server
