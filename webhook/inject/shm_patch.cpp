// The /dev/shm patch (see shm_patch.h).
#include "inject/shm_patch.h"

#include "base/json_fields.h"
#include "base/shm_path.h"
#include "base/text.h"
#include "inject/annotations.h"
#include "inject/pod_facts.h"
#include "sizing/quantity.h"

namespace shmguard::inject {
namespace {

using nlohmann::json;
using sizing::format_quantity;

// One RFC 6902 operation. Built member by member: nlohmann's initializer-list form copies each
// pair through a temporary array, and every admission builds a few of these.
json patch_op(const char* op, std::string path, json value) {
  json o(json::value_t::object);
  auto& m = o.get_ref<json::object_t&>();
  m.emplace("op", op);
  m.emplace("path", std::move(path));
  m.emplace("value", std::move(value));
  return o;
}

// Adds `element` to the list at `path` + "/" + key of `parent`: appended to an existing array, else
// the list [element] added when the key is absent, or replacing what it holds (null).
void add_or_append(json& ops, const json& parent, const std::string& path, const char* key, const json& element) {
  auto it = parent.find(key);
  std::string where = path + "/" + key;
  if (it != parent.end() && it->is_array()) {
    ops.push_back(patch_op("add", where + "/-", element));
    return;
  }
  json list = json::array();
  list.push_back(element);
  ops.push_back(patch_op(it == parent.end() ? "add" : "replace", std::move(where), std::move(list)));
}

// Sets shmguard's two annotations: adds what is missing (creating metadata or annotations when
// needed) and replaces values that differ.
void annotation_ops(const json& pod, const json& annotations, json& ops) {
  auto md = pod.find("metadata");
  if (md == pod.end()) {
    ops.push_back(patch_op("add", "/metadata", {{"annotations", annotations}}));
    return;
  }
  if (!md->is_object()) {
    ops.push_back(patch_op("replace", "/metadata", {{"annotations", annotations}}));
    return;
  }
  auto an = md->find("annotations");
  if (an == md->end()) {
    ops.push_back(patch_op("add", "/metadata/annotations", annotations));
    return;
  }
  if (!an->is_object()) {
    ops.push_back(patch_op("replace", "/metadata/annotations", annotations));
    return;
  }
  for (const auto& [k, v] : annotations.items()) {
    auto old = an->find(k);
    if (old != an->end() && *old == v) continue;
    ops.push_back(patch_op(old == an->end() ? "add" : "replace", "/metadata/annotations/" + escape_pointer_token(k), v));
  }
}

json shm_volume(const std::string& size_text) {
  json empty_dir(json::value_t::object);
  empty_dir.get_ref<json::object_t&>().emplace("medium", "Memory");
  empty_dir.get_ref<json::object_t&>().emplace("sizeLimit", size_text);
  json volume(json::value_t::object);
  volume.get_ref<json::object_t&>().emplace("name", kVolumeName);
  volume.get_ref<json::object_t&>().emplace("emptyDir", std::move(empty_dir));
  return volume;  // built member by member, as patch_op is
}

// The volume at `vol_path` made a Memory emptyDir of `size_text`, when it is not one of that size.
void refresh_volume(const json& vol, const std::string& vol_path, const sizing::SizingResult& s, RefreshPatch& p) {
  const std::string size_text = format_quantity(s.bytes);
  const json* ed = object_at(vol, "emptyDir");
  const json* medium = ed ? child(*ed, "medium") : nullptr;
  const json* limit = ed ? child(*ed, "sizeLimit") : nullptr;
  if (!ed || !medium || *medium != "Memory") {
    p.ops.push_back(patch_op("replace", vol_path, shm_volume(size_text)));
    p.stale = true;
    p.what = "volume " + std::string(kVolumeName) + " is not a Memory emptyDir";
  } else if (!limit || *limit != size_text) {
    p.ops.push_back(patch_op(limit ? "replace" : "add", vol_path + "/emptyDir/sizeLimit", size_text));
    auto held = limit && limit->is_string() ? held_bytes(limit->get_ref<const std::string&>()) : std::nullopt;
    if (held != s.bytes) {
      p.stale = true;
      p.what = "has " + (limit && limit->is_string() ? printable(limit->get_ref<const std::string&>()) : "no sizeLimit") +
               ", needs " + size_text;
    }
  }
}

}  // namespace

const json& own_shm_mount() {
  static const json mount = {{"name", kVolumeName}, {"mountPath", kShmPath}};
  return mount;
}

json new_shm_patch(const json& pod, const config::SelectionConfig& sel, const std::string& size_text,
                   const std::string& explanation) {
  json ops = json::array();
  annotation_ops(pod, {{kInjectedSizeKey, size_text}, {kSizingKey, explanation}}, ops);
  const json& spec = pod.at("spec");
  const json volume = shm_volume(size_text);
  add_or_append(ops, spec, "/spec", "volumes", volume);
  for (const char* field : managed_container_fields(sel)) {
    auto list = spec.find(field);
    if (list == spec.end() || !list->is_array()) continue;
    for (std::size_t i = 0; i < list->size(); ++i) {
      add_or_append(ops, (*list)[i], std::string("/spec/") + field + "/" + std::to_string(i), "volumeMounts",
                    own_shm_mount());
    }
  }
  return ops;
}

RefreshPatch refresh_shm_patch(const json& pod, const config::SelectionConfig& sel, std::size_t volume_index,
                               const sizing::SizingResult& s) {
  RefreshPatch p;
  const json& spec = pod.at("spec");
  refresh_volume(spec.at("volumes").at(volume_index), "/spec/volumes/" + std::to_string(volume_index), s, p);
  for (const char* field : managed_container_fields(sel)) {
    auto list = spec.find(field);
    if (list == spec.end() || !list->is_array()) continue;
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& c = (*list)[i];
      if (mounts_volume(c, kVolumeName) || mounts_shm_path(c)) continue;
      add_or_append(p.ops, c, std::string("/spec/") + field + "/" + std::to_string(i), "volumeMounts", own_shm_mount());
      if (!p.stale) p.what = "container " + printable(c.value("name", std::string("?"))) + " does not mount it";
      p.stale = true;
    }
  }
  annotation_ops(pod, {{kInjectedSizeKey, format_quantity(s.bytes)}, {kSizingKey, s.explanation}}, p.ops);
  return p;
}

bool patch_applies(const json& pod, const json& patch) {
  try {
    (void)pod.patch(patch);
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

}  // namespace shmguard::inject
