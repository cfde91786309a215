// /dev/shm use per pod (see shm_usage.h).
#include "monitor/shm_usage.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "base/enum_table.h"
#include "base/json_fields.h"
#include "base/shm_path.h"
#include "sizing/quantity.h"

namespace shmguard::monitor {
namespace {

using nlohmann::json;

std::uint64_t number(const json& o, const char* key) {
  const json* v = child(o, key);
  return v && v->is_number_unsigned() ? v->get<std::uint64_t>() : 0;
}

// The name of the volume a regular container mounts at /dev/shm, or "".
std::string shm_volume_name(const json& spec) {
  for (const auto& c : array_items(spec, "containers"))
    for (const auto& m : array_items(c, "volumeMounts"))
      if (is_shm_path(str_field(m, "mountPath"))) return str_field(m, "name");
  return "";
}

// The controller that owns the pod; a Job's pods are named after a JobSet that made it.
void set_owner(const json& pod_md, PodShm& p) {
  for (const auto& r : array_items(pod_md, "ownerReferences")) {
    const json* ctl = child(r, "controller");
    if (ctl && ctl->is_boolean() && ctl->get<bool>()) {
      p.owner_kind = str_field(r, "kind");
      p.owner_name = str_field(r, "name");
    }
  }
  const json* labels = child(pod_md, "labels");
  if (p.owner_kind == "Job" && labels) {
    if (auto js = str_field(*labels, "jobset.sigs.k8s.io/jobset-name"); !js.empty()) {
      p.owner_kind = "JobSet";
      p.owner_name = js;
    }
  }
}

using Keys = std::unordered_set<std::string_view>;

// A SAX handler that builds only the object members whose key is in `keys` (at any depth), or, with
// `drop`, all but those: a member it leaves out is lexed and dropped, never built. (nlohmann's
// parser callback builds each value before it may be discarded: 1.5x the time and twice the memory
// on a 60 MB pod list.)
class KeepingSax {
 public:
  KeepingSax(const Keys& keys, bool drop) : keys_(keys), drop_(drop) {}
  json result;

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const std::string&) { return put(v); }
  bool string(std::string& v) { return put(std::move(v)); }
  bool binary(json::binary_t&) { return put(nullptr); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (skip_depth_ > 0) return true;
    if ((keys_.count(k) == 0) != drop_) skip_next_ = true;
    else key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  bool put(json v) {
    if (skip_depth_ > 0) return true;
    if (skip_next_) return skip_next_ = false, true;
    place(std::move(v));
    return true;
  }
  bool open(json v) {
    if (skip_depth_ > 0) return ++skip_depth_, true;
    if (skip_next_) return skip_next_ = false, skip_depth_ = 1, true;
    stack_.push_back(place(std::move(v)));
    return true;
  }
  bool close() {
    if (skip_depth_ > 0) return --skip_depth_, true;
    stack_.pop_back();
    return true;
  }
  // Into the open container (objects are maps and arrays only grow at the end, so the pointers to
  // the open containers above stay valid).
  json* place(json v) {
    if (stack_.empty()) return &(result = std::move(v));
    json& top = *stack_.back();
    if (top.is_array()) return top.push_back(std::move(v)), &top.back();
    return &(top[key_] = std::move(v));
  }

  const Keys& keys_;
  const bool drop_;
  std::vector<json*> stack_;
  std::string key_;
  int skip_depth_ = 0;     // inside a member left out, this many containers deep
  bool skip_next_ = false;  // the next value belongs to a key left out
};

// Parses `text` keeping only object keys in `keys` (at any depth), or with `drop` all but those;
// null when it is not JSON.
json parse_keeping(const std::string& text, const Keys& keys, bool drop = false) {
  KeepingSax sax(keys, drop);
  if (!json::sax_parse(text, &sax, json::input_format_t::json, true)) return json();
  return std::move(sax.result);
}

}  // namespace

json parse_pod_list(const std::string& text) {
  // Every running pod is judged by the engine (protection.h), which reads what a pod's spec says of
  // its containers: the list is kept but for what neither the engine nor the monitor reads, the
  // heaviest parts of a real pod.
  static const Keys drop{"managedFields", "kubectl.kubernetes.io/last-applied-configuration", "conditions",
                         "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "affinity", "tolerations",
                         "topologySpreadConstraints", "podIPs", "hostIPs", "dnsConfig", "readinessGates",
                         "imageID", "containerID", "ports", "securityContext"};
  return parse_keeping(text, drop, true);
}

json parse_node_list(const std::string& text) {
  // A node's status carries its images and conditions (tens of KB on a busy node): kept out.
  static const Keys keep{"items", "metadata", "name", "continue", "status", "addresses",
                                                         "type", "address", "daemonEndpoints", "kubeletEndpoint", "Port"};
  return parse_keeping(text, keep);
}

json parse_namespace_list(const std::string& text) {
  static const Keys drop{"managedFields", "annotations", "spec", "status"};
  return parse_keeping(text, drop, true);
}

std::vector<KubeletAddress> kubelet_addresses(const json& node_list) {
  std::vector<KubeletAddress> out;
  for (const auto& n : array_items(node_list, "items")) {
    const json* md = child(n, "metadata");
    const json* status = child(n, "status");
    KubeletAddress k;
    k.node = md ? str_field(*md, "name") : "";
    for (const char* type : {"InternalIP", "Hostname", "ExternalIP"})
      for (const auto& ad : array_items(status, "addresses"))
        if (k.address.empty() && str_field(ad, "type") == type) k.address = str_field(ad, "address");
    const json* ep = status ? child(*status, "daemonEndpoints") : nullptr;
    const json* kubelet = ep ? child(*ep, "kubeletEndpoint") : nullptr;
    const json* port = kubelet ? child(*kubelet, "Port") : nullptr;
    if (port && port->is_number_integer() && port->get<std::int64_t>() > 0 && port->get<std::int64_t>() < 65536)
      k.port = port->get<int>();
    if (!k.node.empty() && !k.address.empty()) out.push_back(std::move(k));
  }
  return out;
}

json parse_summary(const std::string& text) {
  static const Keys keep{"pods", "podRef", "name", "namespace", "uid", "volume",
                         "capacityBytes", "availableBytes", "usedBytes", "time"};
  return parse_keeping(text, keep);
}

namespace {

// The Memory emptyDir named `volume` among the pod's volumes, or null.
const json* memory_volume(const json& spec, const std::string& volume) {
  for (const auto& v : array_items(spec, "volumes")) {
    const json* ed = child(v, "emptyDir");
    if (str_field(v, "name") == volume && ed && str_field(*ed, "medium") == "Memory") return ed;
  }
  return nullptr;
}

// The containers' restarts: their sum, and the one that ended last.
void set_restarts(const json& status, PodShm& p) {
  for (const auto& c : array_items(status, "containerStatuses")) {
    const json* n = child(c, "restartCount");
    if (n && n->is_number_unsigned()) p.restarts += n->get<std::uint64_t>();
    const json* last = child(c, "lastState");
    const json* term = last ? object_at(*last, "terminated") : nullptr;
    if (!term || str_field(*term, "finishedAt") < p.restart_finished) continue;
    p.restart_finished = str_field(*term, "finishedAt");
    p.restarted_container = str_field(c, "name");
    const json* code = child(*term, "exitCode");
    p.restart_exit_code = code && code->is_number_integer() ? code->get<int>() : 0;
  }
}

}  // namespace

std::optional<WatchedPod> watched_pod(const json& pod, const config::Config* cfg) {
  const json* status = child(pod, "status");
  const json* spec = child(pod, "spec");
  const json* md = child(pod, "metadata");
  if (!status || str_field(*status, "phase") != "Running" || !spec || !md) return std::nullopt;
  WatchedPod w;
  PodShm& p = w.pod;
  const std::string volume = shm_volume_name(*spec);
  const json* ed = volume.empty() ? nullptr : memory_volume(*spec, volume);
  if (cfg) w.assessment = assess_pod(pod, *cfg);
  if (!ed && w.assessment.kind == Assessment::Kind::kFine) return std::nullopt;
  p.namespace_name = str_field(*md, "namespace");
  p.name = str_field(*md, "name");
  p.uid = str_field(*md, "uid");
  p.node = str_field(*spec, "nodeName");
  if (ed) {
    p.volume = volume;
    if (auto limit = str_field(*ed, "sizeLimit"); !limit.empty())
      if (auto q = sizing::parse_size(limit)) p.size_limit = *q;
  }
  set_owner(*md, p);
  set_restarts(*status, p);
  return w;
}

std::optional<PodShm> judged_pod(const WatchedPod& w, const Judge* judge) {
  PodShm p = w.pod;
  if (judge) p.protection = judge_assessed(w.assessment, p.namespace_name, *judge);
  if (p.volume.empty() && p.protection.reason == Unprotected::kNo) return std::nullopt;
  return p;
}

std::vector<PodShm> running_pods(const json& pod_list, const Judge* judge) {
  std::vector<PodShm> out;
  for (const auto& pod : array_items(pod_list, "items"))
    if (auto w = watched_pod(pod, judge ? judge->cfg : nullptr))
      if (auto p = judged_pod(*w, judge)) out.push_back(std::move(*p));
  return out;
}

PodIndex index_pods(const std::vector<PodShm>& pods) {
  PodIndex index;
  index.reserve(pods.size() * 2);
  for (std::size_t i = 0; i < pods.size(); ++i) {
    if (!pods[i].uid.empty()) index.emplace(pods[i].uid, i);
    index.emplace(pods[i].namespace_name + "/" + pods[i].name, i);
  }
  return index;
}

std::size_t apply_summary(std::vector<PodShm>& pods, const PodIndex& index, const std::string& node,
                          const json& summary) {
  std::size_t found = 0;
  for (const auto& ps : array_items(summary, "pods")) {
    const json* ref = child(ps, "podRef");
    if (!ref) continue;
    const std::string uid = str_field(*ref, "uid");
    auto at = index.find(uid.empty() ? str_field(*ref, "namespace") + "/" + str_field(*ref, "name") : uid);
    if (at == index.end() || pods[at->second].node != node) continue;
    PodShm& pod = pods[at->second];
    for (const auto& v : array_items(ps, "volume")) {
      if (str_field(v, "name") != pod.volume) continue;
      const std::uint64_t cap = number(v, "capacityBytes"), avail = number(v, "availableBytes");
      if (cap == 0) continue;
      pod.capacity = cap;
      pod.used = cap > avail ? cap - avail : 0;
      pod.du_bytes = number(v, "usedBytes");
      pod.stats_time = str_field(v, "time");
      pod.peak = std::max(pod.peak, *pod.used);
      ++found;
    }
  }
  return found;
}

std::size_t apply_summary(std::vector<PodShm>& pods, const std::string& node, const json& summary) {
  return apply_summary(pods, index_pods(pods), node, summary);
}

namespace {
struct VerdictRow {
  UsageVerdict verdict;
  const char* name;  // top's column
};
constexpr VerdictRow kVerdictTable[] = {
    {.verdict = UsageVerdict::kUnknown, .name = "no stats yet"},
    {.verdict = UsageVerdict::kNearlyFull, .name = "nearly full"},
    {.verdict = UsageVerdict::kOversized, .name = "oversized"},
    {.verdict = UsageVerdict::kOk, .name = "ok"},
};
static_assert(in_enum_order(kVerdictTable, &VerdictRow::verdict, static_cast<std::size_t>(UsageVerdict::kCount)),
              "kVerdictTable: one row for every UsageVerdict, in its order");
}  // namespace

const char* verdict_name(UsageVerdict v) { return kVerdictTable[static_cast<std::size_t>(v)].name; }

bool leftover_worth_telling(std::uint64_t du_bytes, std::uint64_t capacity) {
  return du_bytes >= std::max<std::uint64_t>(1 << 20, capacity / 100);
}

bool nearly_full(const PodShm& p) {
  return p.capacity && std::max(p.peak, p.used.value_or(0)) >= *p.capacity / 10 * 9 + *p.capacity % 10 * 9 / 10;
}

UsageVerdict verdict(const PodShm& p, const sizing::Params& params) {
  if (!p.capacity) return UsageVerdict::kUnknown;
  const std::uint64_t seen = std::max(p.peak, p.used.value_or(0));
  if (nearly_full(p)) return UsageVerdict::kNearlyFull;
  if (*p.capacity / 4 > sizing::size_for_peak(seen, params)) return UsageVerdict::kOversized;
  return UsageVerdict::kOk;
}

std::optional<std::uint64_t> suggestion(const PodShm& p, const sizing::Params& params) {
  const UsageVerdict v = verdict(p, params);
  if (v != UsageVerdict::kNearlyFull && v != UsageVerdict::kOversized) return std::nullopt;
  return sizing::size_for_peak(std::max(p.peak, p.used.value_or(0)), params);
}

}  // namespace shmguard::monitor
