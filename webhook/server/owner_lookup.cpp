#include "server/owner_lookup.h"

#include <utility>

#include "base/json_fields.h"
#include "inject/annotations.h"

namespace shmguard::server {

using nlohmann::json;

std::string jobset_path(const std::string& ns, const std::string& name) {
  // Namespace and name are DNS labels/subdomains (the API server checked the pod's namespace; the
  // label value is at most a DNS label's characters): nothing in them needs escaping, and anything
  // else is refused by the API server as a 404.
  return "/apis/jobset.x-k8s.io/v1alpha2/namespaces/" + ns + "/jobsets/" + name;
}

admission::OwnerAnnotations read_jobset_answer(const std::string& ns, const std::string& name, int status,
                                               const json& body, const std::string& transport_error) {
  admission::OwnerAnnotations a;
  a.from = "JobSet " + ns + "/" + name;
  auto failed = [&](const char* result, const std::string& why) {
    a.result = result;
    a.warning = "shmguard: could not read " + a.from + " for its shmguard.io/ annotations (" + why +
                "); sized from the pod's own facts";
    return a;
  };
  if (!transport_error.empty()) return failed("error", transport_error);
  if (status == 404) return failed("not-found", "not found");
  if (status == 401 || status == 403)
    return failed("forbidden", "HTTP " + std::to_string(status) + ": the webhook's service account needs get on jobsets.jobset.x-k8s.io");
  if (status != 200 || !body.is_object()) return failed("error", "HTTP " + std::to_string(status));
  const json* md = object_at(body, "metadata");
  const json* an = md ? object_at(*md, "annotations") : nullptr;
  if (an)
    for (const auto& [k, v] : an->items())
      if (k.starts_with(inject::kAnnotationPrefix)) a.annotations[k] = v;
  a.result = a.annotations.empty() ? "none" : "found";
  return a;
}

OwnerLookup::OwnerLookup(AccessSource access, Getter get) : access_(std::move(access)), get_(std::move(get)) {}

admission::OwnerAnnotations OwnerLookup::lookup(const std::string& ns, const std::string& jobset,
                                                const config::OwnerLookupConfig& cfg) {
  const std::string key = ns + "/" + jobset;
  const auto now = now_();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end() && it->second.expires > now) {
      admission::OwnerAnnotations a = it->second.answer;
      a.cached = true;
      return a;
    }
  }
  // The GET runs unlocked: other JobSets' pods are not held up by this one's wait.
  admission::OwnerAnnotations a;
  if (auto access = access_(); !access) {
    a = read_jobset_answer(ns, jobset, 0, nullptr, access.error());
  } else if (auto r = get_(*access, jobset_path(ns, jobset), static_cast<long>(cfg.timeout_ms)); !r) {
    a = read_jobset_answer(ns, jobset, 0, nullptr, r.error());
  } else {
    a = read_jobset_answer(ns, jobset, r->status, r->body, "");
  }
  const bool failed = a.result == "error" || a.result == "forbidden";
  const auto ttl = failed ? std::chrono::duration_cast<Clock::duration>(kFailureTtl)
                          : std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(cfg.cache_seconds));
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= kMaxEntries) {
    std::erase_if(entries_, [now](const auto& e) { return e.second.expires <= now; });
    if (entries_.size() >= kMaxEntries) entries_.clear();
  }
  entries_[key] = Entry{a, now + ttl};
  return a;
}

}  // namespace shmguard::server
