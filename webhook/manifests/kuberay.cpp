#include "manifests/kuberay.h"

#include <algorithm>

#include "base/json_fields.h"
#include "base/shm_path.h"

namespace shmguard::manifests::kuberay {

using nlohmann::json;

namespace {

constexpr const char* kVolume = "shared-mem";  // KubeRay's SharedMemoryVolumeName

// `path` is `field` itself or ends with ".field".
bool is_field(std::string_view path, std::string_view field) {
  return path.ends_with(field) && (path.size() == field.size() || path[path.size() - field.size() - 1] == '.');
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool is_group_template(std::string_view path) {
  constexpr std::string_view kTemplate = ".template";
  if (!path.ends_with(kTemplate)) return false;
  path.remove_suffix(kTemplate.size());
  if (is_field(path, "headGroupSpec")) return true;
  const auto open = path.rfind('[');
  if (open == std::string_view::npos || !path.ends_with("]")) return false;
  return is_digits(path.substr(open + 1, path.size() - open - 2)) && is_field(path.substr(0, open), "workerGroupSpecs");
}

bool add_shared_mem(json& tmpl) {
  if (!tmpl.is_object() || !tmpl.contains("spec") || !tmpl["spec"].is_object()) return false;
  json& spec = tmpl["spec"];
  if (!spec.contains("containers") || !spec["containers"].is_array() || spec["containers"].empty() ||
      !spec["containers"][0].is_object())
    return false;
  json& c = spec["containers"][0];
  for (const auto& m : array_items(c, "volumeMounts")) {
    std::string p = m.is_object() ? str_field(m, "mountPath") : "";
    while (p.size() > 1 && p.back() == '/') p.pop_back();  // KubeRay's own test, not is_shm_path
    if (p == kShmPath) return false;
  }
  if (!spec.contains("volumes") || !spec["volumes"].is_array()) spec["volumes"] = json::array();
  json& volumes = spec["volumes"];
  if (std::none_of(volumes.begin(), volumes.end(), [](const json& v) { return v.is_object() && str_field(v, "name") == kVolume; })) {
    json empty_dir = {{"medium", "Memory"}};
    const json* res = object_at(c, "resources");
    for (const char* field : {"limits", "requests"}) {  // findMemoryReqOrLimit: the limit first
      const json* list = res ? object_at(*res, field) : nullptr;
      const json* mem = list ? child(*list, "memory") : nullptr;
      if (mem && (mem->is_string() || mem->is_number())) {
        empty_dir["sizeLimit"] = mem->is_string() ? *mem : json(mem->dump());
        break;
      }
    }
    volumes.push_back({{"name", kVolume}, {"emptyDir", std::move(empty_dir)}});
  }
  if (!c.contains("volumeMounts") || !c["volumeMounts"].is_array()) c["volumeMounts"] = json::array();
  c["volumeMounts"].push_back({{"name", kVolume}, {"mountPath", kShmPath}});
  return true;
}

}  // namespace shmguard::manifests::kuberay
