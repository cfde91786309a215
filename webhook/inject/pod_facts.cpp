// What the engine reads off a pod (see pod_facts.h).
#include "inject/pod_facts.h"

#include <algorithm>

#include "base/json_fields.h"
#include "base/shm_path.h"
#include "sizing/quantity.h"

namespace shmguard::inject {
namespace {

using nlohmann::json;

bool is_shm_mount(const json& mount) {
  const json* p = child(mount, "mountPath");
  return p && p->is_string() && is_shm_path(p->get_ref<const std::string&>());
}

std::optional<std::uint64_t> resource_limit(const json& resources_owner, const char* resource) {
  const json* res = object_at(resources_owner, "resources");
  const json* lim = res ? object_at(*res, "limits") : nullptr;
  if (!lim) return std::nullopt;
  auto raw = value_text(*lim, resource);
  return raw ? held_bytes(*raw) : std::nullopt;
}

// The first reason the pod cannot be patched safely; "" when it can.
std::string shape_problem(const json& pod, const json* spec) {
  if (!pod.is_object()) return "object is not a JSON object";
  if (const json* m = child(pod, "metadata"); m && !m->is_object() && !m->is_null()) return "metadata is not an object";
  if (const json* m = object_at(pod, "metadata")) {
    if (const json* an = child(*m, "annotations"); an && !an->is_object() && !an->is_null())
      return "metadata.annotations is not an object";
  }
  if (!spec) return "spec is missing or not an object";
  const json* containers = child(*spec, "containers");
  if (!containers || !containers->is_array() || containers->empty())
    return "spec.containers is missing, empty or not a list";
  if (const json* v = child(*spec, "volumes"); v && !v->is_array() && !v->is_null()) return "spec.volumes is not a list";
  return "";
}

// Mounts (the first at /dev/shm) and memory limits of one container list; `invalid` for a bad shape.
void gather_containers(const json& spec, const char* field, PodFacts& f, std::uint64_t& mem_sum, bool& any_mem) {
  const json* list = child(spec, field);
  if (!list || list->is_null()) return;
  if (!list->is_array()) {
    if (f.invalid.empty()) f.invalid = std::string("spec.") + field + " is not a list";
    return;
  }
  for (const auto& c : *list) {
    if (!c.is_object()) {
      if (f.invalid.empty()) f.invalid = std::string("an entry of spec.") + field + " is not an object";
      continue;
    }
    if (const json* mounts = child(c, "volumeMounts"); mounts && mounts->is_array()) {
      for (const auto& m : *mounts)
        if (!f.shm_volume_mount && is_shm_mount(m)) f.shm_volume_mount = &m;
    } else if (mounts && !mounts->is_null() && f.invalid.empty()) {
      f.invalid = std::string("volumeMounts of a container in spec.") + field + " is not a list";
    }
    if (std::string_view(field) != "containers") continue;
    if (auto m = resource_limit(c, "memory")) {
      mem_sum += std::min<std::uint64_t>(*m, sizing::kArithmeticLimit);
      any_mem = true;
    }
  }
}

}  // namespace

PodFacts gather_pod_facts(const json& pod, const json* spec) {
  PodFacts f;
  f.invalid = shape_problem(pod, spec);
  if (!f.invalid.empty()) return f;
  if (const json* v = child(*spec, "volumes"); v && v->is_array()) {
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json* n = child((*v)[i], "name");
      if (n && n->is_string() && n->get_ref<const std::string&>() == kVolumeName) f.owned_volume = i;
    }
  }
  std::uint64_t mem_sum = 0;
  bool any_mem = false;
  for (const char* field : {"containers", "initContainers", "ephemeralContainers"})
    gather_containers(*spec, field, f, mem_sum, any_mem);
  if (auto pod_mem = resource_limit(*spec, "memory")) f.memory_limit = pod_mem;
  else if (any_mem) f.memory_limit = mem_sum;
  return f;
}

std::vector<const char*> managed_container_fields(const config::SelectionConfig& sel) {
  std::vector<const char*> f{"containers"};
  if (sel.inject_init_containers) f.push_back("initContainers");
  if (sel.inject_ephemeral_containers) f.push_back("ephemeralContainers");
  return f;
}

std::optional<std::uint64_t> held_bytes(const std::string& raw) {
  auto bytes = sizing::parse_size(raw, {.zero_ok = true, .saturate_ok = true});
  return bytes ? std::optional(*bytes) : std::nullopt;
}

std::optional<std::uint64_t> existing_shm_size(const json* spec, const json& mount) {
  const json* name = child(mount, "name");
  const json* vols = spec ? child(*spec, "volumes") : nullptr;
  if (!name || !name->is_string() || !vols || !vols->is_array()) return std::nullopt;
  for (const auto& v : *vols) {
    const json* n = child(v, "name");
    if (!n || *n != *name) continue;
    const json* ed = object_at(v, "emptyDir");
    if (!ed) return std::nullopt;
    auto raw = value_text(*ed, "sizeLimit");
    return raw ? held_bytes(*raw) : std::nullopt;
  }
  return std::nullopt;
}

bool mounts_volume(const json& container, std::string_view volume) {
  const json* mounts = child(container, "volumeMounts");
  if (!mounts || !mounts->is_array()) return false;
  for (const auto& m : *mounts) {
    const json* n = child(m, "name");
    if (n && n->is_string() && n->get_ref<const std::string&>() == volume) return true;
  }
  return false;
}

bool mounts_shm_path(const json& container) {
  const json* mounts = child(container, "volumeMounts");
  if (!mounts || !mounts->is_array()) return false;
  return std::any_of(mounts->begin(), mounts->end(), [](const json& m) { return is_shm_mount(m); });
}

}  // namespace shmguard::inject
