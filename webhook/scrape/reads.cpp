// The pods, the judge, the kubelets and the summaries (see reads.h).
#include "scrape/reads.h"

#include <iterator>
#include <mutex>

#include "base/json_fields.h"
#include "base/parallel.h"
#include "kube/list.h"

namespace shmguard::scrape {

using nlohmann::json;

Result<std::vector<monitor::PodShm>> list_pods(const kube::Access& api, const PodQuery& q, int timeout_s,
                                               const monitor::Judge* judge) {
  std::string path = q.all_namespaces ? "/api/v1/pods" : "/api/v1/namespaces/" + kube::url_encode(q.namespace_name) + "/pods";
  path += "?fieldSelector=" + kube::url_encode("status.phase=Running");
  if (!q.selector.empty()) path += "&labelSelector=" + kube::url_encode(q.selector);
  std::vector<monitor::PodShm> out;
  auto r = kube::list_pages(kube::getter(api, timeout_s), path, "pods", monitor::parse_pod_list, [&](const json& page) {
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
                                              kube::url_encode("app.kubernetes.io/name=shmguard")
                                        : std::string(kWebhookConfigurations) + "/" + kube::url_encode(name);
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
    (void)kube::list_pages(kube::getter(api, timeout_s), "/api/v1/namespaces", "namespaces", monitor::parse_namespace_list,
                     [&](const json& page) { for (const auto& ns : array_items(page, "items")) take(ns); });
  } else if (auto r = kube::get(api, "/api/v1/namespaces/" + kube::url_encode(q.namespace_name), timeout_s, true); r && r->status == 200) {
    take(json::parse(r->text, nullptr, false));
  }
  return j;
}

Result<std::vector<kube::NodeTarget>> list_kubelets(const kube::Access& api, int timeout_s, const std::string& kubelet_ca,
                                                    bool insecure) {
  std::vector<kube::NodeTarget> out;
  auto r = kube::list_pages(kube::getter(api, timeout_s), "/api/v1/nodes", "nodes", monitor::parse_node_list, [&](const json& page) {
    for (const auto& k : monitor::kubelet_addresses(page))
      out.push_back({k.node, kube::at_kubelet(api, k.address, k.port, kubelet_ca.empty() ? api.ca_pem : kubelet_ca, insecure)});
  });
  if (!r) return r.failure_part();
  if (*r) return Failure{"cannot list nodes: " + kube::error_message(**r) + " (needs `list nodes`)"};
  return out;
}

SummaryReader summary_reader(const kube::Access& api, int timeout_s) {
  return [&api, timeout_s](const kube::NodeTarget& n) { return kube::read_summary(api, n, timeout_s); };
}

std::vector<monitor::NodeScrape> read_summaries(const SummaryReader& read, const std::vector<kube::NodeTarget>& nodes,
                                                std::vector<monitor::PodShm>& pods, unsigned threads) {
  // Each summary is joined as soon as it is read, under the lock, so that at most `threads` of
  // them are held at once (a 50-pod node's summary is ~150 KB of text).
  std::vector<monitor::NodeScrape> out(nodes.size());
  const auto index = monitor::index_pods(pods);
  std::mutex mu;
  parallel_for(nodes.size(), threads, [&](unsigned, std::size_t i) {
    const kube::NodeTarget& n = nodes[i];
    out[i].node = n.name;
    auto text = read(n);
    if (!text) out[i].error = text.error();
    else if (const json summary = monitor::parse_summary(*text); summary.is_null()) out[i].error = "the summary is not JSON";
    else {
      std::lock_guard<std::mutex> lock(mu);
      monitor::apply_summary(pods, index, n.name, summary);
    }
    out[i].ok = out[i].error.empty();
  });
  return out;
}

}  // namespace shmguard::scrape
