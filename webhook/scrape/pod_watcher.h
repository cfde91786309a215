// The monitor's pods from a watch, as client-go's reflector keeps an informer's store: a list
// (pages of 500), then a watch from its resourceVersion with bookmarks, read as it streams; a watch
// the API server ends (its timeoutSeconds) or a cut connection is watched again from the last
// resourceVersion; 410 Gone (an ERROR event or the answer to the watch) lists again. A cycle then
// reads the kept pods (monitor/pod_store.h), never the API server.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "config/config.h"
#include "kube/access.h"
#include "kube/watch.h"
#include "monitor/pod_store.h"
#include "monitor/protection.h"
#include "monitor/shm_usage.h"

namespace shmguard::scrape {

struct PodWatchOptions {
  std::string field_selector = "status.phase=Running";  // the DaemonSet agent adds spec.nodeName=NODE
  int request_timeout_s = 10;  // a list page
  int watch_timeout_s = 300;   // the watch's timeoutSeconds (the API server ends it then; client-go: 5-10 min)
};

class PodWatcher {
 public:
  PodWatcher(const kube::Access& api, PodWatchOptions o, const config::Config* cfg);
  ~PodWatcher();  // stops and joins
  PodWatcher(const PodWatcher&) = delete;
  PodWatcher& operator=(const PodWatcher&) = delete;

  void start();
  void stop();
  // Until the first list is in, or `timeout_s` passed (the failure says the last error).
  Status wait_synced(int timeout_s);

  // The kept pods judged against `judge` (monitor::judged_pod) under the watcher's lock: no copy of
  // the store is made. `any_missing`: the store holds a pod the engine would inject, whose reason
  // needs a judge with the webhook view.
  struct Snapshot {
    std::vector<monitor::PodShm> pods;
    std::size_t kept = 0;
    bool any_missing = false;
    monitor::PodStore::Counts counts;
    std::string resource_version, last_error;
    std::uint64_t api_bytes = 0;  // read from the API server so far (lists and watch streams)
  };
  Snapshot snapshot(const monitor::Judge& judge) const;
  bool any_missing() const;

 private:
  void run();
  bool relist();     // false: failed (last_error_ says why)
  void watch_once();  // returns when the stream ends, is cut, or asks for a relist

  const kube::Access api_;
  const PodWatchOptions o_;
  const config::Config* cfg_;
  mutable std::mutex mu_;
  std::condition_variable synced_cv_;
  monitor::PodStore store_;
  bool synced_ = false, need_list_ = true;
  std::string last_error_;
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<bool> stop_{false};
  kube::StreamCancel cancel_;
  std::thread thread_;
};

}  // namespace shmguard::scrape
