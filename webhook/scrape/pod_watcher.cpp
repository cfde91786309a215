// Pods and kubelet summaries for top and monitor (see kube_stats.h).
#include "cli/kube_stats.h"

#include <iomanip>
#include <iterator>
#include <mutex>
#include <sstream>

#include <chrono>
#include <iostream>

#include "base/json_fields.h"
#include "base/parallel.h"

namespace shmguard::cli {

using nlohmann::json;

std::string url_encode(const std::string& s) {
  std::ostringstream o;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') o << c;
    else o << '%' << std::uppercase << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(c) << std::dec;
  }
  return o.str();
}

namespace {

// Pages of a list, as kubectl reads them: a cluster's 10,000 pods are never one body in memory.
constexpr int kListPage = 500;

// GETs the list at `path` (with or without a query) page by page, each parsed by `parse` and given to
// `take`. A transport failure or a page that is not JSON is a Failure naming `what`; an HTTP error
// comes back as the Response, for the caller to say which permission it wants.
// One page of the list at `path`: from the start, or from `next`, the previous page's continue token.
std::string page_path(const std::string& path, const std::string& next) {
  std::string p = path + (path.find('?') == std::string::npos ? "?" : "&") + "limit=" + std::to_string(kListPage);
  return next.empty() ? p : p + "&continue=" + url_encode(next);
}

template <typename Take>
Result<std::optional<kube::Response>> list_pages(const kube::Access& api, const std::string& path, int timeout_s,
                                                 const char* what, json (*parse)(const std::string&), Take&& take,
                                                 std::atomic<std::uint64_t>* bytes = nullptr) {
  std::string next;
  do {
    auto r = kube::get(api, page_path(path, next), timeout_s, true);
    if (!r) return r.failure_part();
    if (bytes) *bytes += r->text.size();
    if (r->status != 200) return std::optional<kube::Response>(std::move(*r));
    const json page = parse(r->text);
    if (page.is_null()) return Failure{std::string("listing ") + what + ": the API server's answer is not JSON"};
    take(page);
    const json* md = object_at(page, "metadata");
    next = md ? str_field(*md, "continue") : "";
  } while (!next.empty());
  return std::optional<kube::Response>();
}

}  // namespace

Result<std::vector<monitor::PodShm>> list_pods(const kube::Access& api, const PodQuery& q, int timeout_s,
                                               const monitor::Judge* judge) {
  std::string path = q.all_namespaces ? "/api/v1/pods" : "/api/v1/namespaces/" + url_encode(q.namespace_name) + "/pods";
  path += "?fieldSelector=" + url_encode("status.phase=Running");
  if (!q.selector.empty()) path += "&labelSelector=" + url_encode(q.selector);
  std::vector<monitor::PodShm> out;
  auto r = list_pages(api, path, timeout_s, "pods", monitor::parse_pod_list, [&](const json& page) {
    auto more = monitor::running_pods(page, judge);
    out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  });
  if (!r) return r.failure_part();
  if (*r && ((*r)->status == 403 || (*r)->status == 401))
    return Failure{"cannot list pods: " + kube::error_message(**r) + " (needs `list pods` " +
                   (q.all_namespaces ? std::string("in every namespace (-A)") : "in namespace " + q.namespace_name) + ")"};
  if (*r) return Failure{"listing pods: HTTP " + std::to_string((*r)->status) + ": " + kube::error_message(**r)};
  return out;
}

namespace {

constexpr const char* kWebhookConfigurations = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
constexpr const char* kWebhookEntry = "pods.shmguard.io";

// The configuration named `name`, or the one shmguard's label names; its error says why not.
monitor::WebhookView read_webhook(const kube::Access& api, const std::string& name, int timeout_s) {
  monitor::WebhookView view;
  view.name = name;
  const std::string path = name.empty() ? std::string(kWebhookConfigurations) + "?labelSelector=" +
                                              url_encode("app.kubernetes.io/name=shmguard")
                                        : std::string(kWebhookConfigurations) + "/" + url_encode(name);
  auto r = kube::get(api, path, timeout_s, true);
  if (!r) return view.error = "reading MutatingWebhookConfiguration " + name + ": " + r.error(), view;
  if (r->status != 200)
    return view.error = "cannot read MutatingWebhookConfiguration " + (name.empty() ? "labelled app.kubernetes.io/name=shmguard" : name) +
                        ": " + kube::error_message(*r) + (r->status == 404 ? "" : " (needs `get mutatingwebhookconfigurations`)"),
           view;
  const json body = json::parse(r->text, nullptr, false);
  const json* one = &body;
  if (name.empty()) {
    const json& items = array_items(body, "items");
    if (items.empty()) return view.error = "no MutatingWebhookConfiguration is labelled app.kubernetes.io/name=shmguard", view;
    one = &items[0];
  }
  return monitor::read_webhook_view(*one, kWebhookEntry);
}

}  // namespace

monitor::Judge load_judge(const kube::Access& api, const config::Config& cfg, const std::string& configuration,
                          const PodQuery& q, int timeout_s) {
  monitor::Judge j;
  j.cfg = &cfg;
  j.webhook = read_webhook(api, configuration, timeout_s);
  auto take = [&](const json& ns) {
    const json* md = object_at(ns, "metadata");
    const json* labels = md ? object_at(*md, "labels") : nullptr;
    if (md) j.namespace_labels[str_field(*md, "name")] = labels ? *labels : json::object();
  };
  if (q.all_namespaces) {  // unreadable namespaces are judged by the label every namespace has
    (void)list_pages(api, "/api/v1/namespaces", timeout_s, "namespaces", monitor::parse_namespace_list,
                     [&](const json& page) { for (const auto& ns : array_items(page, "items")) take(ns); });
  } else if (auto r = kube::get(api, "/api/v1/namespaces/" + url_encode(q.namespace_name), timeout_s, true); r && r->status == 200) {
    take(json::parse(r->text, nullptr, false));
  }
  return j;
}

Result<std::vector<NodeTarget>> list_kubelets(const kube::Access& api, int timeout_s, const std::string& kubelet_ca,
                                              bool insecure) {
  std::vector<NodeTarget> out;
  auto r = list_pages(api, "/api/v1/nodes", timeout_s, "nodes", monitor::parse_node_list, [&](const json& page) {
    for (const auto& k : monitor::kubelet_addresses(page))
      out.push_back({k.node, kube::at_kubelet(api, k.address, k.port, kubelet_ca.empty() ? api.ca_pem : kubelet_ca, insecure)});
  });
  if (!r) return r.failure_part();
  if (*r) return Failure{"cannot list nodes: " + kube::error_message(**r) + " (needs `list nodes`)"};
  return out;
}

std::vector<monitor::NodeScrape> read_summaries(const kube::Access& api, const std::vector<NodeTarget>& nodes,
                                                std::vector<monitor::PodShm>& pods, int timeout_s, unsigned threads) {
  // Each summary is joined as soon as it is read, under the lock, so that at most `threads` of
  // them are held at once (a 50-pod node's summary is ~150 KB of text).
  std::vector<monitor::NodeScrape> out(nodes.size());
  const auto index = monitor::index_pods(pods);
  std::mutex mu;
  parallel_for(nodes.size(), threads, [&](unsigned, std::size_t i) {
    const NodeTarget& n = nodes[i];
    out[i].node = n.name;
    auto r = n.kubelet ? kube::get(*n.kubelet, "/stats/summary", timeout_s, true)
                       : kube::get(api, "/api/v1/nodes/" + url_encode(n.name) + "/proxy/stats/summary", timeout_s, true);
    if (!r) out[i].error = r.error();
    else if (r->status == 403 || r->status == 401)
      out[i].error = kube::error_message(*r) + (n.kubelet ? " (the kubelet wants `get nodes/stats`)"
                                                          : " (needs `get nodes/proxy`: the API server's node proxy)");
    else if (r->status != 200) out[i].error = "HTTP " + std::to_string(r->status) + ": " + kube::error_message(*r);
    else if (const json summary = monitor::parse_summary(r->text); summary.is_null()) out[i].error = "the summary is not JSON";
    else {
      std::lock_guard<std::mutex> lock(mu);
      monitor::apply_summary(pods, index, n.name, summary);
    }
    out[i].ok = out[i].error.empty();
  });
  return out;
}

PodWatcher::PodWatcher(const kube::Access& api, PodWatchOptions o, const config::Config* cfg)
    : api_(api), o_(std::move(o)), cfg_(cfg), store_(cfg) {}

PodWatcher::~PodWatcher() { stop(); }

void PodWatcher::start() { thread_ = std::thread([this] { run(); }); }

void PodWatcher::stop() {
  stop_ = true;
  cancel_.cancel();
  synced_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status PodWatcher::wait_synced(int timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  synced_cv_.wait_for(lock, std::chrono::seconds(timeout_s), [&] { return synced_ || stop_; });
  if (synced_) return Ok{};
  return Failure{last_error_.empty() ? "the first list of pods is not in yet" : last_error_};
}

bool PodWatcher::any_missing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_.any_assessed_missing();
}

PodWatcher::Snapshot PodWatcher::snapshot(const monitor::Judge& judge) const {
  Snapshot s;
  std::lock_guard<std::mutex> lock(mu_);
  s.pods = store_.pods(&judge);
  s.kept = store_.size();
  s.any_missing = store_.any_assessed_missing();
  s.counts = store_.counts();
  s.resource_version = store_.resource_version();
  s.last_error = last_error_;
  s.api_bytes = bytes_;
  return s;
}

namespace {

std::string pods_path(const PodWatchOptions& o) {
  return "/api/v1/pods" + (o.field_selector.empty() ? std::string() : "?fieldSelector=" + url_encode(o.field_selector));
}

}  // namespace

bool PodWatcher::relist() {
  const auto t0 = std::chrono::steady_clock::now();
  auto listing = store_.start_listing();
  std::string rv;
  auto r = list_pages(api_, pods_path(o_), o_.request_timeout_s, "pods", monitor::parse_pod_list, [&](const json& page) {
    listing.add_page(page, cfg_);
    const json* md = object_at(page, "metadata");
    if (md && rv.empty()) rv = str_field(*md, "resourceVersion");  // the first page's: the list's snapshot
  }, &bytes_);
  std::string error;
  if (!r) error = r.error();
  else if (*r && ((*r)->status == 403 || (*r)->status == 401))
    error = "cannot list pods: " + kube::error_message(**r) + " (needs `list pods` in every namespace)";
  else if (*r) error = "listing pods: HTTP " + std::to_string((*r)->status) + ": " + kube::error_message(**r);
  std::lock_guard<std::mutex> lock(mu_);
  if (!error.empty()) return last_error_ = error, false;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << (std::string("shmguard monitor: ") + (synced_ ? "relist" : "first list") + " of " + std::to_string(listing.seen) +
                " pods in " + std::to_string(ms) + " ms, resourceVersion " + rv + "\n");
  store_.finish_listing(std::move(listing), rv);
  need_list_ = false;
  synced_ = true;
  last_error_.clear();
  synced_cv_.notify_all();
  return true;
}

void PodWatcher::watch_once() {
  std::string rv;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rv = store_.resource_version();
  }
  const std::string path = pods_path(o_) + (o_.field_selector.empty() ? "?" : "&") +
                           "watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(o_.watch_timeout_s) +
                           "&resourceVersion=" + url_encode(rv);
  bool relist = false, rewatch = false;
  auto end = kube::stream(api_, path, o_.watch_timeout_s + 30, [&](std::string_view line) {
    bytes_ += line.size() + 1;
    const json event = monitor::parse_pod_list(std::string(line));
    std::lock_guard<std::mutex> lock(mu_);
    const monitor::WatchStep step = event.is_object() ? store_.apply(event) : monitor::WatchStep::kRewatch;
    if (step == monitor::WatchStep::kRelist) relist = true;
    if (step == monitor::WatchStep::kRewatch) rewatch = true;
    return step == monitor::WatchStep::kContinue;
  }, &cancel_);
  if (end && end->status != 200) bytes_ += end->bytes;
  std::lock_guard<std::mutex> lock(mu_);
  if (!end) {
    last_error_ = "watching pods: " + end.error();
  } else if (end->status == 410) {
    relist = true;  // the resourceVersion is too old for the API server's watch cache
  } else if (end->status != 200) {
    last_error_ = "watching pods: HTTP " + std::to_string(end->status) + ": " + end->text.substr(0, 300) +
                  (end->status == 403 ? " (needs `watch pods`)" : "");
  } else if (rewatch) {
    last_error_ = "watching pods: the API server sent an ERROR event or a line that is not one";
  }
  if (relist) need_list_ = true;
}

void PodWatcher::run() {
  int backoff_ms = 500;
  while (!stop_) {
    bool list;
    {
      std::lock_guard<std::mutex> lock(mu_);
      list = need_list_;
    }
    bool ok = true;
    if (list) ok = relist();
    if (ok && !stop_) {
      const auto t0 = std::chrono::steady_clock::now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_error_.clear();
      }
      watch_once();
      std::lock_guard<std::mutex> lock(mu_);
      // A watch that ended at once (an error, a cut) waits before the next; one that ran a while did not fail.
      ok = last_error_.empty() || std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30);
      if (!last_error_.empty()) std::cerr << "shmguard monitor: " + last_error_ + "\n";
    } else if (!ok) {
      std::lock_guard<std::mutex> lock(mu_);
      std::cerr << "shmguard monitor: " + last_error_ + "\n";
    }
    if (ok) {
      backoff_ms = 500;
      continue;
    }
    for (int waited = 0; waited < backoff_ms && !stop_; waited += 50) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    backoff_ms = std::min(backoff_ms * 2, 30000);
  }
}

}  // namespace shmguard::cli
