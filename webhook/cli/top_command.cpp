// `shmguard top` (see top_command.h). Used = capacityBytes - availableBytes of the /dev/shm volume in the
// kubelet's Summary API (monitor/shm_usage.h says why never usedBytes).
#include "cli/top_command.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/text.h"
#include "cli/shared.h"
#include "cli/exit_codes.h"
#include "kube/access.h"
#include "monitor/shm_usage.h"
#include "scrape/reads.h"
#include "sizing/quantity.h"

namespace shmguard::cli {
namespace {

using nlohmann::json;
using monitor::PodShm;

// Every node the pods run on, read through the API server's node proxy; the ones that failed, with why.
std::map<std::string, std::string> read_nodes(const kube::Access& access, const TopArgs& a, std::vector<PodShm>& pods) {
  std::set<std::string> names;
  for (const auto& p : pods)
    if (!p.node.empty() && !p.volume.empty()) names.insert(p.node);
  std::vector<kube::NodeTarget> nodes;
  for (const auto& n : names) nodes.push_back({n, std::nullopt});
  std::map<std::string, std::string> failed;
  for (const auto& s : scrape::read_summaries(scrape::summary_reader(access, a.timeout_s), nodes, pods, 16))
    if (!s.ok) failed[s.node] = s.error;
  return failed;
}

std::string bar(std::uint64_t used, std::uint64_t cap) {
  constexpr int kWidth = 20;
  const int filled = cap ? static_cast<int>(std::min<std::uint64_t>(used * kWidth / cap, kWidth)) : 0;
  return "[" + std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(kWidth - filled), '.') + "]";
}

std::string q(std::optional<std::uint64_t> v) { return v ? sizing::format_quantity(*v) : "-"; }

std::string percent(const PodShm& p) {
  if (!p.capacity || !p.used) return "-";
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << 100.0 * static_cast<double>(*p.used) / static_cast<double>(*p.capacity) << "%";
  return o.str();
}

std::string owner(const PodShm& p) { return p.owner_kind.empty() ? "-" : p.owner_kind + "/" + p.owner_name; }

// The verdict on the pod's /dev/shm volume; "-" for an unprotected pod without one.
std::string verdict_text(const PodShm& p, const sizing::Params& params) {
  return p.volume.empty() ? "-" : monitor::verdict_name(monitor::verdict(p, params));
}

void render_table(const std::vector<PodShm>& pods, bool watch, const sizing::Params& params, std::ostream& os) {
  std::vector<std::vector<std::string>> rows{{"NAMESPACE/POD", "OWNER", "SIZE", "MOUNTED", "USED", "", "USE%"}};
  if (watch) rows[0].push_back("PEAK");
  rows[0].push_back("VERDICT");
  // The column when there is something to say in it.
  const bool any = std::any_of(pods.begin(), pods.end(), [](const PodShm& p) { return p.protection.reason != monitor::Unprotected::kNo; });
  if (any) rows[0].push_back("UNPROTECTED");
  for (const auto& p : pods) {
    std::vector<std::string> r{p.namespace_name + "/" + p.name, owner(p), q(p.size_limit), q(p.capacity),
                               p.used ? sizing::format_human(*p.used) : "-",
                               p.capacity ? bar(p.used.value_or(0), *p.capacity) : "", percent(p)};
    if (watch) r.push_back(p.capacity ? sizing::format_human(p.peak) : "-");
    r.push_back(verdict_text(p, params));
    if (any) r.push_back(monitor::unprotected_row(p.protection.reason).text);
    rows.push_back(std::move(r));
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) line += r[i] + (i + 1 < r.size() ? std::string(width[i] - r[i].size() + 2, ' ') : "");
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
  // One suggestion per owner: the largest its pods need.
  std::map<std::string, std::uint64_t> by_owner;
  for (const auto& p : pods)
    if (auto s = monitor::suggestion(p, params)) {
      auto& v = by_owner[p.namespace_name + " " + (p.owner_kind.empty() ? "Pod/" + p.name : owner(p))];
      v = std::max(v, *s);
    }
  for (const auto& [who, size] : by_owner)
    os << "suggestion: " << who.substr(who.find(' ') + 1) << " (namespace " << who.substr(0, who.find(' '))
       << "): shmguard.io/size: " << sizing::format_quantity(size) << "\n";
}

// One line per unprotected pod, after the table: why, and what to do.
void render_unprotected(const std::vector<PodShm>& pods, const monitor::Judge& judge, std::ostream& os) {
  for (const auto& p : pods)
    if (p.protection.reason != monitor::Unprotected::kNo)
      os << "unprotected: " << p.namespace_name << "/" << p.name << ": "
         << monitor::unprotected_message(p.protection, p.namespace_name, judge) << "\n";
}

json unprotected_json(const PodShm& p, const monitor::Judge& judge) {
  if (p.protection.reason == monitor::Unprotected::kNo) return nullptr;
  json j = {{"reason", monitor::unprotected_row(p.protection.reason).name},
            {"needBytes", p.protection.need}, {"need", sizing::format_quantity(p.protection.need)},
            {"message", monitor::unprotected_message(p.protection, p.namespace_name, judge)}};
  j["hasBytes"] = p.protection.has ? json(*p.protection.has) : json(nullptr);
  return j;
}

json to_json(const std::vector<PodShm>& pods, const sizing::Params& params, const std::map<std::string, std::string>& failed,
             const monitor::Judge& judge) {
  json items = json::array();
  for (const auto& p : pods) {
    json j = {{"namespace", p.namespace_name}, {"pod", p.name}, {"node", p.node},
              {"owner", {{"kind", p.owner_kind}, {"name", p.owner_name}}}, {"volume", p.volume},
              {"verdict", verdict_text(p, params)}, {"unprotected", unprotected_json(p, judge)}};
    j["sizeLimitBytes"] = p.size_limit ? json(*p.size_limit) : json(nullptr);
    j["mountedBytes"] = p.capacity ? json(*p.capacity) : json(nullptr);
    j["usedBytes"] = p.used ? json(*p.used) : json(nullptr);
    j["peakBytes"] = p.capacity ? json(p.peak) : json(nullptr);
    j["kubeletUsedBytes"] = p.capacity ? json(p.du_bytes) : json(nullptr);
    // The kubelet measures volumes once per its volume stats period (1m by default): the figures
    // are as old as this says, however fresh the request.
    j["measuredAt"] = p.capacity && !p.stats_time.empty() ? json(p.stats_time) : json(nullptr);
    auto s = monitor::suggestion(p, params);
    j["suggestedSize"] = s ? json(sizing::format_quantity(*s)) : json(nullptr);
    items.push_back(std::move(j));
  }
  json nodes = json::array();
  for (const auto& [n, why] : failed) nodes.push_back({{"node", n}, {"error", why}});
  return {{"items", items}, {"failedNodes", nodes}};
}

}  // namespace

int run_top(const TopArgs& a, const config::Config& cfg) {
  std::optional<int> watch_s = 0;
  if (!a.watch.empty() && !(watch_s = parse_duration_s(a.watch)))
    return fail("top", "--watch: \"" + printable(a.watch) + "\" is not a duration (90s, 2m)");
  if (a.interval_s < 1) return fail("top", "--interval must be at least 1 second");
  auto access = kube::load_access(a.kubeconfig, a.context);
  if (!access) return fail("top", access.error());
  const std::string ns = a.namespace_name.empty() ? "default" : a.namespace_name;
  const scrape::PodQuery query{a.all_namespaces, ns, a.selector};
  const monitor::Judge judge = scrape::load_judge(*access, cfg, a.webhook_configuration, query, a.timeout_s);
  auto pods = scrape::list_pods(*access, query, a.timeout_s, &judge);
  if (!pods) return fail("top", pods.error());
  auto failed = read_nodes(*access, a, *pods);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(*watch_s);
  while (*watch_s > 0 && std::chrono::steady_clock::now() + std::chrono::seconds(a.interval_s) <= end) {
    std::this_thread::sleep_for(std::chrono::seconds(a.interval_s));
    std::vector<PodShm> again = *pods;  // the same pods: their peaks carry over
    for (auto& p : again) p.capacity.reset(), p.used.reset();
    failed = read_nodes(*access, a, again);
    *pods = std::move(again);
  }
  if (a.output == "json") {
    std::cout << to_json(*pods, cfg.sizing, failed, judge).dump(2) << "\n";
  } else if (pods->empty()) {
    std::cout << "No running pods mount a Memory emptyDir at /dev/shm, and no training pod lacks one"
              << (a.all_namespaces ? "" : " in namespace " + ns) << ".\n";
  } else {
    render_table(*pods, *watch_s > 0, cfg.sizing, std::cout);
    render_unprotected(*pods, judge, std::cout);
  }
  for (const auto& [n, why] : failed) std::cerr << "shmguard top: node " << n << ": " << why << "; its pods have no figures\n";
  return failed.empty() ? kExitOk : kExitFindings;
}

void add_top(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<TopArgs>();
  auto config = std::make_shared<std::string>();
  auto* c = app.add_subcommand("top", "How full each running pod's /dev/shm is (the kubelets' Summary API through the API server)");
  set_usage(*c, {.input = "a kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config, or in-cluster) allowed to list pods "
                         "and get nodes/proxy; --config: the webhook's config (which pods are unprotected, the "
                         "suggestion's headroom and min)",
                .output = "-o table (default): a row per pod that mounts a Memory emptyDir at /dev/shm (size, mounted, "
                          "used, peak with --watch, verdict), a suggestion per owner, why a pod is unprotected; "
                          "-o json: the same per pod, with kubeletUsedBytes and measuredAt",
                .exits = {{kExitOk, "every node gave its figures"},
                          {kExitFindings, "a node gave none (named on stderr; the others still shown)"},
                          {kExitBadInput, "bad flags, kubeconfig or config, or the API server refused the list"}}});
  c->add_option("--kubeconfig", a->kubeconfig, "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)");
  c->add_option("--context", a->context, "kubeconfig context (default: its current-context)");
  auto* ns = c->add_option("-n,--namespace", a->namespace_name, "namespace (default: default)");
  c->add_flag("-A,--all-namespaces", a->all_namespaces, "every namespace")->excludes(ns);
  c->add_option("-l,--selector", a->selector, "label selector, as kubectl's");
  c->add_option("--watch", a->watch, "sample for this long (e.g. 5m) and show each pod's peak");
  c->add_option("--interval", a->interval_s, "seconds between samples with --watch")->capture_default_str();
  c->add_option("-o,--output", a->output, "table or json")->check(CLI::IsMember({"table", "json"}));
  c->add_option("--request-timeout", a->timeout_s, "seconds per request to the API server")->capture_default_str();
  c->add_option("--config", *config, "YAML config file: the webhook's (its selection rules judge which pods are "
                 "unprotected; headroom and min give the suggestion)");
  c->add_option("--webhook-configuration", a->webhook_configuration,
      "shmguard's MutatingWebhookConfiguration, to say why a pod is unprotected (default: the one labelled "
      "app.kubernetes.io/name=shmguard)");
  c->callback([a, config, &out] {
    auto cfg = load_config(*config);
    out.code = cfg ? run_top(*a, *cfg) : fail(cfg.error());
  });
}

}  // namespace shmguard::cli
