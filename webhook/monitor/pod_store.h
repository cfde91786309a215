// The pods the monitor keeps between cycles, fed by a list and then a watch from its
// resourceVersion (as client-go's reflector feeds an informer's store): each event's pod is reduced
// at once to what the monitor uses (shm_usage.h WatchedPod, with the engine's assessment made
// there, once per version of the pod) and the JSON is dropped, so memory follows the pods kept, not
// the bytes read. Pure: parsed list pages and watch events in; what the watcher must do next out.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "monitor/shm_usage.h"

namespace shmguard::monitor {

// What a watch event asks of the watcher.
enum class WatchStep : std::uint8_t {
  kContinue,  // applied (ADDED/MODIFIED/DELETED/BOOKMARK): read on
  kRelist,    // ERROR 410 Gone / "too old resource version": the resourceVersion expired, list again
  kRewatch,   // another ERROR, or an event that is not one: watch again from the last resourceVersion
};

class PodStore {
 public:
  // `cfg`: the engine's config, to assess each pod (protection.h); null: not assessed.
  explicit PodStore(const config::Config* cfg) : cfg_(cfg) {}

  // A relist, page by page: the store is replaced at finish(), so a cycle during a relist reads
  // the pods as they were. `resource_version` is the list's metadata.resourceVersion.
  class Listing {
   public:
    void add_page(const nlohmann::json& page, const config::Config* cfg);
    std::size_t seen = 0;  // items read (kept or not)

   private:
    friend class PodStore;
    std::unordered_map<std::string, WatchedPod> pods_;
  };
  Listing start_listing() const { return Listing(); }
  void finish_listing(Listing&& l, std::string resource_version);

  // One watch event ({"type": ..., "object": ...}, parsed with parse_pod_list's filter).
  WatchStep apply(const nlohmann::json& event);

  const std::string& resource_version() const { return resource_version_; }
  std::size_t size() const { return pods_.size(); }
  // Any pod the engine would inject (Assessment::kMissing): only then is a cycle's judge (the
  // webhook configuration and the namespaces, which say why it was missed) worth reading.
  bool any_assessed_missing() const { return missing_ > 0; }

  // A copy of what is kept, for a cycle to judge and join outside the watcher's lock.
  std::vector<WatchedPod> kept() const;
  // The kept pods as a cycle reports them (judged_pod), in no particular order.
  std::vector<PodShm> pods(const Judge* judge) const;

  struct Counts {
    std::uint64_t added = 0, modified = 0, deleted = 0, bookmarks = 0, errors = 0, relists = 0;
  };
  const Counts& counts() const { return counts_; }

 private:
  void put(const std::string& key, std::optional<WatchedPod> w);

  const config::Config* cfg_;
  std::unordered_map<std::string, WatchedPod> pods_;  // by uid (namespace/name without one)
  std::size_t missing_ = 0;                           // of pods_, assessed kMissing
  std::string resource_version_;
  Counts counts_;
};

// The key a pod is kept by: its uid, namespace/name when it has none.
std::string pod_key(const nlohmann::json& pod);

}  // namespace shmguard::monitor
