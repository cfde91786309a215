// The KRM function behind `shmguard fn` (see fn_command.h).
#include "cli/fn_command.h"

#include "cli/shared.h"
#include "cli/exit_codes.h"

#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/json_fields.h"
#include "manifests/document.h"
#include "manifests/yaml_doc.h"
#include "sizing/quantity.h"

namespace shmguard::cli {
namespace {

using nlohmann::json;



// The item a template belongs to: "/items/3/spec/template" -> 3.
std::optional<std::size_t> item_index(const std::string& pointer) {
  const std::string prefix = "/items/";
  if (pointer.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::size_t end = pointer.find('/', prefix.size());
  std::string digits = pointer.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
  auto n = sizing::parse_count(digits);
  if (!n) return std::nullopt;
  return static_cast<std::size_t>(*n);
}

json result_for(const json& list, const manifests::TemplateReport& r, const std::string& severity,
                const std::string& message) {
  json res = {{"message", message}, {"severity", severity}};
  auto idx = item_index(r.ref.pointer);
  const json* item = nullptr;
  if (idx && list.contains("items") && list["items"].is_array() && *idx < list["items"].size())
    item = &list["items"][*idx];
  if (item) {
    json ref = {{"apiVersion", str_field(*item, "apiVersion")}, {"kind", str_field(*item, "kind")}};
    const json md = item->value("metadata", json::object());
    ref["name"] = str_field(md, "name");
    if (!str_field(md, "namespace").empty()) ref["namespace"] = str_field(md, "namespace");
    res["resourceRef"] = ref;
    const json ann = md.is_object() ? md.value("annotations", json::object()) : json::object();
    std::string path = str_field(ann, "internal.config.kubernetes.io/path");
    if (path.empty()) path = str_field(ann, "config.kubernetes.io/path");
    std::string index = str_field(ann, "internal.config.kubernetes.io/index");
    if (index.empty()) index = str_field(ann, "config.kubernetes.io/index");
    if (!path.empty()) {
      res["file"] = {{"path", path}};
      if (auto n = sizing::parse_count(index)) res["file"]["index"] = *n;
    }
    std::string field = r.ref.path;
    if (field.rfind("items[", 0) == 0) {
      auto close = field.find(']');
      field = close + 1 < field.size() ? field.substr(close + 2) : std::string();
    }
    if (!field.empty()) res["field"] = {{"path", field}};  // a Pod item is the template itself
  }
  return res;
}

std::vector<json> results_for(const json& list, const manifests::TemplateReport& r) {
  std::vector<json> out;
  const auto& res = r.result;
  if (res.mutated()) out.push_back(result_for(list, r, "info", r.summary_done()));
  if (res.too_small) out.push_back(result_for(list, r, "warning", r.summary_planned()));
  for (const auto& w : res.warnings) out.push_back(result_for(list, r, "warning", w.text));
  return out;
}

// One result as a block-YAML sequence item at `indent` ("- " and its keys), by the manifests' emitter.
Result<std::string> result_item(const json& result, int indent) {
  auto lines = manifests::render(result, {.indent = indent + 2, .inline_first = true, .name_first = false});
  if (!lines) return lines;
  return std::string(static_cast<std::size_t>(indent), ' ') + "- " + *lines;
}

// The results from `from` on as block-YAML items at `indent`, after `body`.
bool append_results(std::string& body, const json& results, std::size_t from, int indent, std::ostream& err) {
  for (std::size_t i = from; i < results.size(); ++i) {
    auto item = result_item(results[i], indent);
    if (!item) {
      err << "shmguard fn: internal error: " << item.error() << "\n";
      return false;
    }
    body += *item;
  }
  return true;
}

// Block YAML with results from an earlier function as its last key: ours go after them. Block YAML
// without results: a `results:` key after the last one, nothing else moves. Otherwise (JSON, flow
// style, results elsewhere): the whole list as JSON, `list` with the templates' patches applied
// (what `body`, the edited text, reads back as).
int write_list(const manifests::YamlDocument& doc, json& list, const std::vector<manifests::TemplateReport>& reports,
               const json& results, bool had_results, std::string body, std::ostream& out, std::ostream& err) {
  const auto& pairs = doc.root->pairs;
  const manifests::YamlNode* prior = !pairs.empty() && pairs.back().first->value == "results" ? pairs.back().second : nullptr;
  const bool block = !doc.root->flow;
  if (!body.empty() && body.back() != '\n' && block && (prior || !had_results)) body += '\n';
  if (block && prior && prior->kind == manifests::YamlNode::Kind::kSequence && !prior->flow && !prior->items.empty()) {
    if (!append_results(body, results, list["results"].size(), prior->column, err)) return kExitFunctionError;
    out << body;
    return kExitOk;
  }
  if (block && !had_results) {
    body += results.empty() ? "results: []\n" : "results:\n";
    if (!append_results(body, results, 0, 0, err)) return kExitFunctionError;
    out << body;
    return kExitOk;
  }
  json patch = json::array();
  for (const auto& r : reports)
    if (r.result.mutated()) manifests::append_in_document(r.ref.pointer, r.result.patch, patch);
  try {
    list.patch_inplace(patch);  // the runner applied the same patches to the same items
  } catch (const json::exception& e) {
    err << "shmguard fn: internal error: " << e.what() << "\n";
    return kExitFunctionError;
  }
  list["results"] = results;
  out << list.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  return kExitOk;
}

}  // namespace

int run_krm_function(std::istream& in, std::ostream& out, std::ostream& err, const config::Config& cfg) {
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  manifests::YamlDocument doc;
  auto parsed = manifests::parse_document(text, doc);
  if (!parsed || !doc.root) {
    err << "shmguard fn: <stdin>:" << parsed.line() << ": not a ResourceList: "
        << (parsed ? "empty input" : parsed.error()) << "\n";
    return kExitFunctionError;
  }
  auto list = manifests::to_json(doc.root, manifests::node_budget(text));
  if (!list || !list->is_object() || str_field(*list, "kind") != "ResourceList" ||
      str_field(*list, "apiVersion").rfind("config.kubernetes.io/", 0) != 0) {
    err << "shmguard fn: stdin is not a config.kubernetes.io/v1 ResourceList\n";
    return kExitFunctionError;
  }
  const manifests::DocumentOptions opts;  // YAML: the list's own text, edited in place
  manifests::DocumentWorker worker(cfg, opts);
  auto outcome = worker.run_parsed("<stdin>", 1, manifests::RawDocument{text, 1}, doc);
  if (!outcome.status) {
    err << "shmguard fn: " << outcome.status.error() << "\n";
    return kExitFunctionError;
  }
  json results = json::array();
  if (list->contains("results") && (*list)["results"].is_array()) results = (*list)["results"];
  const bool had_results = !results.empty() || list->contains("results");
  for (const auto& r : outcome.reports)
    for (auto& res : results_for(*list, r)) results.push_back(std::move(res));

  return write_list(doc, *list, outcome.reports, results, had_results, std::move(outcome.text), out, err);
}

void add_fn(CLI::App& app, Outcome& out) {
  auto config = std::make_shared<std::string>();
  auto* c = app.add_subcommand("fn", "KRM function: a ResourceList on stdin, injected items and results on stdout");
  set_usage(*c, {.input = "a config.kubernetes.io/v1 ResourceList on stdin (a kustomize or kpt exec function); "
                         "--config for the webhook's config",
                .output = "the same ResourceList on stdout, its items' pod templates injected, and a results entry "
                          "per injection (info), too-small volume and warning (warning), with resourceRef, field.path "
                          "and file",
                .exits = {{kExitOk, "the list was processed"},
                          {kExitFunctionError, "any failure, the reason on stderr (kpt's function convention)"}}});
  c->add_option("--config", *config, "YAML config file");
  c->callback([config, &out] {
    auto cfg = load_config(*config);
    out.code = cfg ? run_krm_function(std::cin, std::cout, std::cerr, *cfg) : fail(cfg.error());
  });
}

}  // namespace shmguard::cli
