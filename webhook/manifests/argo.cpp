// Argo Workflows templates as pods (see argo.h).
#include "manifests/argo.h"

#include <algorithm>
#include <vector>

#include "base/json_fields.h"
#include "manifests/json_patch_fit.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests::argo {
namespace {

using nlohmann::json;

// Where Argo's controller mounts a script's source (common.ExecutorScriptSourcePath).
constexpr const char* kScriptPath = "/argo/staging/script";

bool is_shell(const json& command) {
  if (!command.is_array() || command.empty() || !command[0].is_string()) return false;
  std::string word = command[0].get<std::string>();
  word = word.substr(word.rfind('/') == std::string::npos ? 0 : word.rfind('/') + 1);
  return word == "sh" || word == "bash" || word == "dash" || word == "ash" || word == "zsh";
}

// One container of the pod and where it comes from in the template.
struct Source {
  std::string pointer;      // "/container", "/script", "/containerSet/containers/2", "/sidecars/0"
  json container;           // as the pod has it
  std::size_t own_mounts;   // the template's own volumeMounts; the pod's after these are shared ones
  std::string shared;       // where those shared mounts live ("/containerSet/volumeMounts"), if anywhere
  bool mirrored = false;    // a sidecar with mirrorVolumeMounts: the main container's mounts reach it
};

std::size_t mount_count(const json& c) { return array_items(c, "volumeMounts").size(); }

// A script template's container: the source run as Argo runs it, a shell's as `sh -c source`.
json script_container(const json& script) {
  json c = script;
  c.erase("source");
  const std::string source = str_field(script, "source");
  if (source.empty()) return c;
  json args = c.contains("args") && c["args"].is_array() ? c["args"] : json::array();
  if (is_shell(c.value("command", json()))) {
    json command = c["command"];
    for (auto& a : args) command.push_back(a);
    command.push_back("-c");
    command.push_back(source);
    c["command"] = std::move(command);
    c.erase("args");
  } else {
    args.push_back(kScriptPath);
    c["args"] = std::move(args);
  }
  return c;
}

// The main containers, as workflowpod.go names them: "main", unless a containerSet names its own.
std::vector<Source> main_containers(const json& tmpl) {
  std::vector<Source> out;
  if (const json* main = object_at(tmpl, "container")) {
    out.push_back({"/container", *main, mount_count(*main), ""});
  } else if (const json* s = object_at(tmpl, "script")) {
    out.push_back({"/script", script_container(*s), mount_count(*s), ""});
  } else if (const json* set = object_at(tmpl, "containerSet")) {
    const json& shared = array_items(*set, "volumeMounts");
    const json& list = array_items(*set, "containers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      json c = list[i].is_object() ? list[i] : json::object();
      c.erase("dependencies");
      const std::size_t own = mount_count(c);
      if (!shared.empty()) {
        if (!c.contains("volumeMounts") || !c["volumeMounts"].is_array()) c["volumeMounts"] = json::array();
        for (const auto& m : shared) c["volumeMounts"].push_back(m);
      }
      out.push_back({"/containerSet/containers/" + std::to_string(i), std::move(c), own, "/containerSet/volumeMounts"});
    }
    return out;
  }
  for (auto& s : out) s.container["name"] = "main";
  return out;
}

// Every regular container of the pod: the main ones, then the sidecars (addSidecars).
std::vector<Source> pod_containers(const json& tmpl) {
  std::vector<Source> out = main_containers(tmpl);
  const json main_mounts = out.empty() ? json::array() : out[0].container.value("volumeMounts", json::array());
  const json& sidecars = array_items(tmpl, "sidecars");
  for (std::size_t i = 0; i < sidecars.size(); ++i) {
    json c = sidecars[i].is_object() ? sidecars[i] : json::object();
    const bool mirror = c.value("mirrorVolumeMounts", false) == true;
    c.erase("mirrorVolumeMounts");
    const std::size_t own = mount_count(c);
    if (mirror && main_mounts.is_array())
      for (const auto& m : main_mounts) c["volumeMounts"].push_back(m);
    out.push_back({"/sidecars/" + std::to_string(i), std::move(c), own, "", mirror});
  }
  return out;
}

void merge_metadata(json& md, const json* from) {
  if (!from) return;
  for (const char* key : {"labels", "annotations"})
    if (const json* m = object_at(*from, key))
      for (const auto& [k, v] : m->items()) md[key][k] = v;
}

// The template's volumes, then the workflow's that a mount names (addVolumeReferences).
json pod_volumes(const json& tmpl, const json& workflow, const json& pod_spec) {
  json vols = array_items(tmpl, "volumes");
  auto has = [&](const std::string& name) {
    return std::any_of(vols.begin(), vols.end(), [&](const json& v) { return str_field(v, "name") == name; });
  };
  for (const char* list : {"containers", "initContainers"})
    for (const auto& c : array_items(pod_spec, list))
      for (const auto& m : array_items(c, "volumeMounts")) {
        const std::string name = str_field(m, "name");
        if (name.empty() || has(name)) continue;
        for (const auto& v : array_items(workflow, "volumes"))
          if (str_field(v, "name") == name) vols.push_back(v);
      }
  return vols;
}

}  // namespace

bool is_workflow_kind(std::string_view api_version, std::string_view kind) {
  if (api_version.substr(0, api_version.find('/')) != "argoproj.io") return false;
  return kind == "Workflow" || kind == "WorkflowTemplate" || kind == "ClusterWorkflowTemplate" || kind == "CronWorkflow";
}

std::string_view workflow_spec_key(std::string_view kind) { return kind == "CronWorkflow" ? "workflowSpec" : ""; }

json build_pod(const json& tmpl, const json& workflow, const std::string& owner_name) {
  const std::string owner = owner_name.empty() ? "workflow" : owner_name;
  json md = {{"generateName", owner + "-"}, {"labels", {{"workflows.argoproj.io/workflow", owner}}}};
  merge_metadata(md, object_at(workflow, "podMetadata"));
  merge_metadata(md, object_at(tmpl, "metadata"));
  json spec = {{"restartPolicy", "Never"}, {"containers", json::array()}};
  for (auto& s : pod_containers(tmpl)) spec["containers"].push_back(std::move(s.container));
  if (const json* init = child(tmpl, "initContainers"); init && init->is_array() && !init->empty()) {
    spec["initContainers"] = *init;
    for (auto& c : spec["initContainers"])
      if (c.is_object()) c.erase("mirrorVolumeMounts");
  }
  if (json vols = pod_volumes(tmpl, workflow, spec); !vols.empty()) spec["volumes"] = std::move(vols);
  if (const json* r = object_at(tmpl, "podResources")) spec["resources"] = *r;
  else if (const json* wr = object_at(workflow, "podResources")) spec["resources"] = *wr;
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", std::move(md)}, {"spec", std::move(spec)}};
}

namespace {

std::vector<std::string> tokens(const std::string& path) { return pointer_tokens(path); }

std::string join(const std::vector<std::string>& t, std::size_t from) {
  std::string p;
  for (std::size_t i = from; i < t.size(); ++i) p += "/" + escape_pointer_token(t[i]);
  return p;
}

std::optional<std::size_t> index_of(const std::string& t) {
  if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return static_cast<std::size_t>(std::stoul(t));
}

// A container's volumeMounts path in the template: its own, the shared ones after them, or "" when
// the edit is not the template's to write (a mirrored sidecar gets the main container's).
std::optional<std::string> mounts_path(const Source& s, const std::vector<std::string>& t) {
  const std::string rest = join(t, 5);
  if (t.size() == 4) return s.mirrored ? "" : s.pointer + "/volumeMounts";
  if (t[4] == "-") return s.mirrored ? "" : s.pointer + "/volumeMounts/-" + rest;
  auto k = index_of(t[4]);
  if (!k) return std::nullopt;
  if (*k < s.own_mounts) return s.pointer + "/volumeMounts/" + t[4] + rest;
  if (s.mirrored) return "";
  if (s.shared.empty()) return std::nullopt;
  return s.shared + "/" + std::to_string(*k - s.own_mounts) + rest;
}

// One operation's path in the template; "" to leave it out, nullopt when it has no place there.
std::optional<std::string> map_path(const std::string& path, const json& tmpl, const std::vector<Source>& sources) {
  const auto t = tokens(path);
  if (t.size() >= 1 && t[0] == "metadata") return path;
  if (t.size() < 2 || t[0] != "spec") return std::nullopt;
  if (t[1] == "volumes") {
    if (t.size() == 2) return "/volumes";
    if (t[2] == "-") return "/volumes/-" + join(t, 3);
    auto i = index_of(t[2]);
    if (i && *i < array_items(tmpl, "volumes").size()) return "/volumes/" + t[2] + join(t, 3);
    return std::nullopt;  // a workflow volume
  }
  if (t.size() < 3) return std::nullopt;
  auto n = index_of(t[2]);
  if (!n) return std::nullopt;
  if (t[1] == "initContainers") return "/initContainers/" + t[2] + join(t, 3);
  if (t[1] != "containers" || *n >= sources.size()) return std::nullopt;
  if (t.size() >= 4 && t[3] == "volumeMounts") return mounts_path(sources[*n], t);
  return sources[*n].pointer + join(t, 3);
}

}  // namespace

std::optional<json> template_patch(const json& pod_patch, const json& tmpl, const json& workflow, std::string& why) {
  (void)workflow;
  const auto sources = pod_containers(tmpl);
  json mapped = json::array();
  for (const auto& op : pod_patch) {
    const std::string path = str_field(op, "path");
    auto to = map_path(path, tmpl, sources);
    if (!to) {
      why = "the pod's " + path + " has no place in the Argo template";
      return std::nullopt;
    }
    if (to->empty()) continue;
    json m = op;
    m["path"] = *to;
    mapped.push_back(std::move(m));
  }
  return fit_patch(tmpl, mapped, why);
}

}  // namespace shmguard::manifests::argo
