// The monitor's pods between cycles (see pod_store.h).
#include "monitor/pod_store.h"

#include "base/json_fields.h"

namespace shmguard::monitor {
namespace {

using nlohmann::json;

bool flagged(const WatchedPod& w) { return w.assessment.kind == Assessment::Kind::kMissing; }

// A Status of an ERROR event saying the resourceVersion is gone: 410, reason Expired or Gone, or
// the message an older API server gives ("too old resource version").
bool expired(const json& status) {
  const json* code = child(status, "code");
  if (code && code->is_number_integer() && code->get<std::int64_t>() == 410) return true;
  const std::string reason = str_field(status, "reason");
  return reason == "Expired" || reason == "Gone" ||
         str_field(status, "message").find("too old resource version") != std::string::npos;
}

std::string resource_version_of(const json& obj) {
  const json* md = child(obj, "metadata");
  return md ? str_field(*md, "resourceVersion") : "";
}

}  // namespace

std::string pod_key(const json& pod) {
  const json* md = child(pod, "metadata");
  if (!md) return "";
  const std::string uid = str_field(*md, "uid");
  return uid.empty() ? str_field(*md, "namespace") + "/" + str_field(*md, "name") : uid;
}

void PodStore::Listing::add_page(const json& page, const config::Config* cfg) {
  for (const auto& pod : array_items(page, "items")) {
    ++seen;
    if (auto w = watched_pod(pod, cfg)) pods_.insert_or_assign(pod_key(pod), std::move(*w));
  }
}

void PodStore::finish_listing(Listing&& l, std::string resource_version) {
  pods_ = std::move(l.pods_);
  missing_ = 0;
  for (const auto& [k, w] : pods_) missing_ += flagged(w);
  resource_version_ = std::move(resource_version);
  ++counts_.relists;
}

void PodStore::put(const std::string& key, std::optional<WatchedPod> w) {
  auto it = pods_.find(key);
  if (it != pods_.end()) {
    missing_ -= flagged(it->second);
    if (!w) {
      pods_.erase(it);
      return;
    }
    it->second = std::move(*w);
    missing_ += flagged(it->second);
  } else if (w) {
    missing_ += flagged(*w);
    pods_.emplace(key, std::move(*w));
  }
}

WatchStep PodStore::apply(const json& event) {
  const std::string type = str_field(event, "type");
  const json* obj = child(event, "object");
  if (!obj || !obj->is_object()) return ++counts_.errors, WatchStep::kRewatch;
  if (type == "ERROR") {
    ++counts_.errors;
    return expired(*obj) ? WatchStep::kRelist : WatchStep::kRewatch;
  }
  const std::string rv = resource_version_of(*obj);
  if (type == "BOOKMARK") {
    ++counts_.bookmarks;
  } else if (type == "ADDED" || type == "MODIFIED") {
    ++(type == "ADDED" ? counts_.added : counts_.modified);
    // A pod that stops running (or stops mounting a /dev/shm) stops being kept; the API server also
    // sends DELETED when it leaves the watch's field selector (status.phase=Running).
    put(pod_key(*obj), watched_pod(*obj, cfg_));
  } else if (type == "DELETED") {
    ++counts_.deleted;
    put(pod_key(*obj), std::nullopt);
  } else {
    return ++counts_.errors, WatchStep::kRewatch;
  }
  if (!rv.empty()) resource_version_ = rv;
  return WatchStep::kContinue;
}

std::vector<WatchedPod> PodStore::kept() const {
  std::vector<WatchedPod> out;
  out.reserve(pods_.size());
  for (const auto& [k, w] : pods_) out.push_back(w);
  return out;
}

std::vector<PodShm> PodStore::pods(const Judge* judge) const {
  std::vector<PodShm> out;
  out.reserve(pods_.size());
  for (const auto& [k, w] : pods_)
    if (auto p = judged_pod(w, judge)) out.push_back(std::move(*p));
  return out;
}

}  // namespace shmguard::monitor
