// Observed /dev/shm figures matched to manifests (see observed.h).
#include "manifests/observed.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string_view>

#include "base/json_fields.h"
#include "base/shm_path.h"
#include "base/text.h"
#include "inject/annotations.h"
#include "manifests/document.h"
#include "manifests/kuberay.h"
#include "sizing/quantity.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;

int line_at(const std::string& text, std::size_t byte) {
  byte = std::min(byte, text.size());
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(byte), '\n'));
}

std::optional<std::uint64_t> bytes_field(const json& item, const char* key) {
  const json* v = child(item, key);
  if (!v || !v->is_number_unsigned()) return std::nullopt;
  return v->get<std::uint64_t>();
}

// Pods keyed by namespace/name: the same pod in several inputs keeps its largest figures.
using PodMap = std::map<std::pair<std::string, std::string>, ObservedPod>;

void merge(PodMap& into, ObservedPod p) {
  auto [it, fresh] = into.try_emplace({p.namespace_name, p.pod}, p);
  if (fresh) return;
  ObservedPod& had = it->second;
  had.peak = std::max(had.peak, p.peak);
  if (p.size_limit) had.size_limit = p.size_limit;
  if (p.mounted) had.mounted = p.mounted;
  if (had.owner_kind.empty()) had.owner_kind = p.owner_kind, had.owner_name = p.owner_name;
}

Status read_top_json(const std::string& file, const std::string& text, PodMap& pods) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return Failure{file + ":" + std::to_string(line_at(text, e.byte ? e.byte - 1 : 0)) + ": not JSON (" +
                   std::string(e.what()).substr(std::string(e.what()).find(']') + 2) + ")"};
  }
  const json* items = doc.is_object() ? child(doc, "items") : nullptr;
  if (!items || !items->is_array())
    return Failure{file + ":1: not the output of `shmguard top -o json` (no \"items\" list)"};
  for (const auto& item : *items) {
    if (!item.is_object()) return Failure{file + ":1: an item of \"items\" is not an object"};
    ObservedPod p;
    p.namespace_name = str_field(item, "namespace");
    p.pod = str_field(item, "pod");
    if (const json* o = object_at(item, "owner")) p.owner_kind = str_field(*o, "kind"), p.owner_name = str_field(*o, "name");
    p.mounted = bytes_field(item, "mountedBytes");
    if (!p.mounted || p.pod.empty()) continue;  // no figures (no stats yet, or no volume)
    p.size_limit = bytes_field(item, "sizeLimitBytes");
    p.peak = std::max(bytes_field(item, "peakBytes").value_or(0), bytes_field(item, "usedBytes").value_or(0));
    merge(pods, std::move(p));
  }
  return Ok{};
}

// `name{k="v",...} value`: the labels unescaped (\\, \", \n), the value as a whole number of bytes.
bool parse_sample(std::string_view line, std::string& name, std::map<std::string, std::string>& labels, double& value) {
  const std::size_t brace = line.find_first_of("{ ");
  if (brace == std::string_view::npos) return false;
  name = std::string(line.substr(0, brace));
  std::size_t i = brace + 1;
  if (line[brace] == ' ') i = line.size();  // no labels: the value follows the name
  while (i < line.size() && line[i] != '}') {
    const std::size_t eq = line.find("=\"", i);
    if (eq == std::string_view::npos) return false;
    std::string key(line.substr(i, eq - i)), val;
    for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        val += line[i] == 'n' ? '\n' : line[i];
      } else {
        val += line[i];
      }
    }
    if (i >= line.size()) return false;
    labels[key] = std::move(val);
    ++i;
    if (i < line.size() && line[i] == ',') ++i;
  }
  if (line[brace] == ' ') i = brace;
  else if (i >= line.size()) return false;
  std::string rest(line.substr(i + 1));
  char* end = nullptr;
  value = std::strtod(rest.c_str(), &end);
  return end != rest.c_str() && value >= 0;
}

Status read_metrics(const std::string& file, const std::string& text, PodMap& pods) {
  int line_no = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#' || !line.starts_with("shmguard_shm_")) continue;
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
    if (!parse_sample(line, name, labels, value))
      return Failure{file + ":" + std::to_string(line_no) + ": not a metric sample: " + printable(std::string(line), 120)};
    const bool peak = name == "shmguard_shm_peak_bytes", used = name == "shmguard_shm_used_bytes",
               size = name == "shmguard_shm_size_bytes";
    if (!peak && !used && !size) continue;
    ObservedPod p;
    p.namespace_name = labels["namespace"], p.pod = labels["pod"];
    p.owner_kind = labels["owner_kind"], p.owner_name = labels["owner_name"];
    if (p.pod.empty()) return Failure{file + ":" + std::to_string(line_no) + ": " + name + " without a pod label"};
    const auto bytes = static_cast<std::uint64_t>(value);
    if (size) p.mounted = bytes;
    else p.peak = bytes;
    merge(pods, std::move(p));
  }
  return Ok{};
}

bool all_of_chars(std::string_view s, int (*pred)(int)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)) != 0; });
}
int no_dash(int c) { return c != '-' && std::isalnum(c); }

// "Job team-a/x" for one namespace, "Job x (namespaces a, b)" for several.
std::string owner_text(const std::vector<const ObservedPod*>& pods) {
  std::set<std::string> namespaces;
  for (const auto* p : pods) namespaces.insert(p->namespace_name);
  const ObservedPod& first = *pods.front();
  const std::string kind = first.owner_kind.empty() ? "Pod" : first.owner_kind;
  const std::string name = first.owner_kind.empty() ? first.pod : first.owner_name;
  std::string out = std::to_string(pods.size()) + (pods.size() == 1 ? " pod of " : " pods of ") + kind + " ";
  if (namespaces.size() == 1) return out + *namespaces.begin() + "/" + name;
  out += name + " (namespaces ";
  for (auto it = namespaces.begin(); it != namespaces.end(); ++it) out += (it == namespaces.begin() ? "" : ", ") + *it;
  return out + ")";
}

std::string percent_of(std::uint64_t part, std::uint64_t whole) {
  return std::to_string(whole ? part * 100 / whole : 0) + "%";
}

}  // namespace

Status read_observed(const std::string& file, const std::string& text, Observed& into) {
  PodMap pods;
  for (auto& p : into.pods) pods.emplace(std::make_pair(p.namespace_name, p.pod), std::move(p));
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return Failure{file + ":1: empty: give `shmguard top -o json` output or the monitor's /metrics"};
  Status s = text[first] == '{' ? read_top_json(file, text, pods) : read_metrics(file, text, pods);
  into.pods.clear();
  for (auto& [k, p] : pods) into.pods.push_back(std::move(p));
  return s;
}

bool made_by(const ObservedPod& pod, const std::string& kind, const std::string& name, const std::string& namespace_name) {
  if (name.empty() || (!namespace_name.empty() && pod.namespace_name != namespace_name)) return false;
  const std::string& k = pod.owner_kind;
  const std::string& n = pod.owner_name;
  if (kind == "Pod") return k.empty() && pod.pod == name;
  if (k == kind && n == name) return true;
  // The owner an operator makes in between, named after the resource: NAME-SUFFIX.
  const bool named_after = n.size() > name.size() + 1 && n.starts_with(name) && n[name.size()] == '-';
  const std::string_view suffix = named_after ? std::string_view(n).substr(name.size() + 1) : "";
  if (kind == "Deployment") return k == "ReplicaSet" && all_of_chars(suffix, no_dash);
  if (kind == "CronJob") return k == "Job" && all_of_chars(suffix, [](int c) { return std::isdigit(c); });
  if (kind == "TrainJob") return k == "JobSet" && n == name;
  if (kind == "RayJob") return k == "RayCluster" && all_of_chars(suffix, no_dash);
  return false;
}

std::optional<std::uint64_t> template_size(const inject::InjectResult& r) {
  if (r.action == inject::Action::kUserManaged) return r.existing_size;
  if (r.sizing) return r.sizing->bytes;
  return r.existing_size;
}

namespace {

// A Kubeflow replica's pods are named NAME-TYPE-INDEX (pytorch-operator, training-operator v1):
// "master" for `spec.pytorchReplicaSpecs.Master.template`, "" for other templates.
std::string replica_of(const TemplateRef& ref) {
  const std::size_t at = ref.path.find("ReplicaSpecs.");
  if (at == std::string::npos) return "";
  const std::size_t from = at + std::string_view("ReplicaSpecs.").size();
  return lowercase(ref.path.substr(from, ref.path.find('.', from) - from));
}

bool of_replica(const ObservedPod& p, const std::string& owner, const std::string& replica) {
  const std::string prefix = owner + "-" + replica + "-";
  return p.pod.starts_with(prefix) && all_of_chars(std::string_view(p.pod).substr(prefix.size()), [](int c) {
           return std::isdigit(c);
         });
}

// NAME-TYPE-INDEX for any TYPE of lowercase letters.
bool of_any_replica(const ObservedPod& p, const std::string& owner) {
  if (!p.pod.starts_with(owner + "-")) return false;
  const std::string_view rest = std::string_view(p.pod).substr(owner.size() + 1);
  const std::size_t dash = rest.find('-');
  return dash != std::string_view::npos && all_of_chars(rest.substr(0, dash), [](int c) { return std::islower(c); }) &&
         all_of_chars(rest.substr(dash + 1), [](int c) { return std::isdigit(c); });
}

}  // namespace

std::optional<OwnerSeen> judge_observed(const Observed& seen, const TemplateRef& ref, std::uint64_t size,
                                        const sizing::Params& params) {
  std::vector<const ObservedPod*> mine;
  for (const auto& p : seen.pods)
    if (made_by(p, ref.kind, ref.name, ref.namespace_name)) mine.push_back(&p);
  if (mine.empty()) return std::nullopt;
  // Of the owner's pods, those of this template: its replica's by name, else those whose
  // /dev/shm has the template's size; when none is, all of them (the manifest changed since).
  auto narrowed = [&](auto keep) {
    std::vector<const ObservedPod*> out;
    std::copy_if(mine.begin(), mine.end(), std::back_inserter(out), keep);
    if (!out.empty()) mine = std::move(out);
  };
  if (const std::string replica = replica_of(ref); !replica.empty()) {
    // Pods named as an operator names replicas, none of this one: its pods were not seen.
    const bool replicas_named = std::any_of(mine.begin(), mine.end(), [&](const ObservedPod* p) {
      return of_any_replica(*p, ref.name);
    });
    if (replicas_named && std::none_of(mine.begin(), mine.end(),
                                       [&](const ObservedPod* p) { return of_replica(*p, ref.name, replica); }))
      return std::nullopt;
    narrowed([&](const ObservedPod* p) { return of_replica(*p, ref.name, replica); });
  }
  narrowed([&](const ObservedPod* p) { return p->size_limit.value_or(p->mounted.value_or(0)) == size; });
  const auto& pods = mine;
  OwnerSeen s;
  s.size = size;
  s.pods = pods.size();
  for (const auto* p : pods) s.peak = std::max(s.peak, p->peak);
  s.suggested = sizing::size_for_peak(s.peak, params);
  const std::string what = owner_text(pods) + " peaked at " + sizing::format_human(s.peak) + ", ";
  const std::string suggest = "; shmguard.io/size: " + sizing::format_quantity(s.suggested);
  if (s.peak * 100 >= size * kOutgrownPercent) {
    s.fit = Fit::kOutgrown;
    s.message = "outgrown: " + what + percent_of(s.peak, size) + " of its " + sizing::format_quantity(size) + suggest;
  } else if (size > kWastefulFactor * std::max<std::uint64_t>(s.peak, sizing::kMi) && s.suggested < size) {
    s.fit = Fit::kWasteful;
    s.message = "wasteful: " + what + percent_of(s.peak, size) + " of its " + sizing::format_quantity(size) +
                " (more than " + std::to_string(kWastefulFactor) + "x what it used)" + suggest;
  } else {
    s.message = "fits: " + what + percent_of(s.peak, size) + " of its " + sizing::format_quantity(size);
  }
  return s;
}

std::vector<std::string> owners_without_document(const Observed& seen, const std::vector<TemplateRef>& refs) {
  std::map<std::string, std::size_t> left;  // "Kind ns/name" -> pods
  for (const auto& p : seen.pods) {
    const bool matched = std::any_of(refs.begin(), refs.end(),
                                     [&](const TemplateRef& r) { return made_by(p, r.kind, r.name, r.namespace_name); });
    if (matched) continue;
    const std::string kind = p.owner_kind.empty() ? "Pod" : p.owner_kind;
    ++left[kind + " " + p.namespace_name + "/" + (p.owner_kind.empty() ? p.pod : p.owner_name)];
  }
  std::vector<std::string> out;
  for (const auto& [who, n] : left) out.push_back(who + " (" + std::to_string(n) + (n == 1 ? " pod)" : " pods)"));
  return out;
}

namespace {

// The ops that set `key` to `value` in the annotations object at `at` ("/metadata/annotations").
void set_annotation(const json& tmpl, const std::string& at, std::string_view key, const std::string& value, json& ops) {
  const json* parent = &tmpl;
  std::string path;
  std::string_view rest = at;
  json nested = json::object();
  nested[std::string(key)] = value;
  while (!rest.empty()) {  // "/metadata/annotations": each missing level added with what it holds
    rest.remove_prefix(1);
    const std::size_t slash = rest.find('/');
    const std::string step(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    path += "/" + step;
    const json* next = parent->is_object() ? object_at(*parent, step.c_str()) : nullptr;
    if (!next) {
      json value_at = nested;
      for (std::string_view r = rest; !r.empty();) {  // the levels still below
        const std::size_t last = r.rfind('/');
        value_at = json{{std::string(r.substr(last + 1)), value_at}};
        r = r.substr(0, last);
      }
      ops.push_back({{"op", "add"}, {"path", path}, {"value", value_at}});
      return;
    }
    parent = next;
  }
  const bool had = parent->contains(std::string(key));
  ops.push_back({{"op", had ? "replace" : "add"}, {"path", path + "/" + escape_pointer_token(key)}, {"value", value}});
}

// The index in spec.volumes of the emptyDir a regular container mounts at /dev/shm.
std::optional<std::size_t> shm_volume_index(const json& tmpl) {
  const json* spec = object_at(tmpl, "spec");
  if (!spec) return std::nullopt;
  std::string name;
  for (const auto& c : array_items(*spec, "containers"))
    for (const auto& m : array_items(c, "volumeMounts"))
      if (is_shm_path(str_field(m, "mountPath")))
        name = str_field(m, "name");
  const json& volumes = array_items(*spec, "volumes");
  for (std::size_t i = 0; i < volumes.size(); ++i)
    if (str_field(volumes[i], "name") == name && object_at(volumes[i], "emptyDir")) return i;
  return std::nullopt;
}

}  // namespace

Result<json> size_edit(const inject::InjectResult& result, const TemplateRef& ref, const json& tmpl, std::uint64_t size,
                       const config::Config& cfg) {
  const std::string text = sizing::format_quantity(size);
  if (ref.template_kind == TemplateKind::kTemplate && kuberay::is_group_template(ref.path))
    return Failure{"KubeRay sizes this group's /dev/shm to the container's memory limit: raise that to " + text};
  json ops = json::array();
  if (result.action == inject::Action::kUserManaged) {
    const auto i = ref.template_kind == TemplateKind::kArgo ? std::nullopt : shm_volume_index(tmpl);
    if (!i) return Failure{"its /dev/shm is not an emptyDir of the template's own volumes: give it sizeLimit: " + text};
    const json& dir = tmpl["spec"]["volumes"][*i]["emptyDir"];
    ops.push_back({{"op", dir.contains("sizeLimit") ? "replace" : "add"},
                   {"path", "/spec/volumes/" + std::to_string(*i) + "/emptyDir/sizeLimit"}, {"value", text}});
    return ops;
  }
  const bool trainjob = ref.template_kind == TemplateKind::kTrainJob;
  set_annotation(tmpl, trainjob ? "/spec/annotations" : "/metadata/annotations", inject::kSizeKey, text, ops);
  // A template that carries shmguard's volume (an earlier `mutate`): the engine brings it to the new size.
  if (trainjob || !shm_volume_index(tmpl) || ref.template_kind == TemplateKind::kArgo) return ops;
  json sized = tmpl;
  sized["metadata"]["annotations"][std::string(inject::kSizeKey)] = text;
  inject::InjectResult again = inject::inject_pod(sized, cfg, engine_options(ref));
  if (again.action == inject::Action::kUpdated)
    for (auto& op : again.patch) ops.push_back(std::move(op));
  return ops;
}

}  // namespace shmguard::manifests
