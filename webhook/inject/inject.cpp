// The injection engine (see inject.h).
#include "inject/inject.h"

#include "sizing/quantity.h"

namespace shmguard::inject {
namespace {

using nlohmann::json;
using sizing::format_quantity;

const json* child(const json& parent, const char* key) {
  if (!parent.is_object()) return nullptr;
  auto it = parent.find(key);
  return it == parent.end() ? nullptr : &*it;
}

const json* object_at(const json& parent, const char* key) {
  const json* c = child(parent, key);
  return c && c->is_object() ? c : nullptr;
}

// The text of annotation `key`; false when absent, or not a scalar (warned).
bool annotation_text(const json* ann, std::string_view key, std::string& raw, std::vector<std::string>& warnings) {
  if (ann && string_value(*ann, key, raw)) return true;
  if (ann && ann->contains(key)) warnings.push_back(std::string(key) + " is not a string; ignored");
  return false;
}

// A positive integer annotation. Values past 2^62 saturate (the formula then clamps to max).
std::optional<std::uint64_t> int_annotation(const json* ann, std::string_view key, bool allow_zero,
                                            std::vector<std::string>& warnings) {
  std::string raw;
  if (!annotation_text(ann, key, raw, warnings)) return std::nullopt;
  bool digits = !raw.empty() && raw.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) {
    warnings.push_back(std::string(key) + " \"" + printable(raw) +
                       "\" is not a whole number; ignored");
    return std::nullopt;
  }
  std::uint64_t v = 0;
  for (char c : raw) {
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
    if (v > (1ULL << 62)) {
      v = 1ULL << 62;
      break;
    }
  }
  if (v == 0 && !allow_zero) {
    warnings.push_back(std::string(key) + " \"0\" must be at least 1; ignored");
    return std::nullopt;
  }
  return v;
}

std::optional<std::uint64_t> quantity_annotation(const json* ann, std::string_view key,
                                                 std::vector<std::string>& warnings) {
  std::string raw;
  if (!annotation_text(ann, key, raw, warnings)) return std::nullopt;
  auto q = sizing::parse_quantity(raw);
  if (!q.ok) {
    warnings.push_back(std::string(key) + " \"" + printable(raw) + "\" is not a quantity (" +
                       q.error + "); ignored");
    return std::nullopt;
  }
  if (q.negative || q.bytes == 0) {
    warnings.push_back(std::string(key) + " \"" + printable(raw) + "\" must be positive; ignored");
    return std::nullopt;
  }
  return q.bytes;
}

// Containers whose mounts shmguard manages, as (field name) in pod spec.
std::vector<const char*> managed_container_fields(const config::SelectionConfig& sel) {
  std::vector<const char*> f{"containers"};
  if (sel.inject_init_containers) f.push_back("initContainers");
  if (sel.inject_ephemeral_containers) f.push_back("ephemeralContainers");
  return f;
}

struct PodFacts {
  std::optional<std::uint64_t> memory_limit;
  std::uint64_t gpus = 0;
  const json* shm_volume_mount = nullptr;  // first container mount at /dev/shm
  bool already_injected = false;
  std::string invalid;  // why the pod cannot be patched safely
};

bool is_shm_path(const json& mount) {
  const json* p = child(mount, "mountPath");
  if (!p || !p->is_string()) return false;
  const auto& s = p->get_ref<const std::string&>();
  return s == "/dev/shm" || s == "/dev/shm/";
}

std::optional<std::uint64_t> resource_limit(const json& resources_owner, const char* resource) {
  const json* res = object_at(resources_owner, "resources");
  const json* lim = res ? object_at(*res, "limits") : nullptr;
  if (!lim) return std::nullopt;
  std::string raw;
  if (!string_value(*lim, resource, raw)) return std::nullopt;
  auto q = sizing::parse_quantity(raw);
  if (!q.ok || q.negative) return std::nullopt;
  return q.bytes;
}

PodFacts gather(const json& pod, const json* spec, const json* annotations) {
  PodFacts f;
  if (!pod.is_object()) {
    f.invalid = "object is not a JSON object";
    return f;
  }
  if (const json* m = child(pod, "metadata"); m && !m->is_object() && !m->is_null())
    f.invalid = "metadata is not an object";
  if (const json* a = child(pod, "metadata"); a && a->is_object()) {
    if (const json* an = child(*a, "annotations"); an && !an->is_object() && !an->is_null())
      f.invalid = "metadata.annotations is not an object";
  }
  if (annotations && annotations->contains(kInjectedSizeKey)) f.already_injected = true;
  if (!spec) {
    if (f.invalid.empty()) f.invalid = "spec is missing or not an object";
    return f;
  }
  const json* containers = child(*spec, "containers");
  if (!containers || !containers->is_array() || containers->empty()) {
    if (f.invalid.empty()) f.invalid = "spec.containers is missing, empty or not a list";
    return f;
  }
  if (const json* v = child(*spec, "volumes"); v && !v->is_array() && !v->is_null()) {
    if (f.invalid.empty()) f.invalid = "spec.volumes is not a list";
  } else if (v && v->is_array()) {
    for (const auto& vol : *v) {
      const json* n = child(vol, "name");
      if (n && n->is_string() && n->get_ref<const std::string&>() == kVolumeName)
        f.already_injected = true;
    }
  }
  std::uint64_t mem_sum = 0;
  bool any_mem = false;
  for (const char* field : {"containers", "initContainers", "ephemeralContainers"}) {
    const json* list = child(*spec, field);
    if (!list) continue;
    if (!list->is_array()) {
      if (!list->is_null() && f.invalid.empty()) f.invalid = std::string("spec.") + field + " is not a list";
      continue;
    }
    for (const auto& c : *list) {
      if (!c.is_object()) {
        if (f.invalid.empty()) f.invalid = std::string("an entry of spec.") + field + " is not an object";
        continue;
      }
      if (const json* mounts = child(c, "volumeMounts")) {
        if (mounts->is_array()) {
          for (const auto& m : *mounts)
            if (!f.shm_volume_mount && is_shm_path(m)) f.shm_volume_mount = &m;
        } else if (!mounts->is_null() && f.invalid.empty()) {
          f.invalid = std::string("volumeMounts of a container in spec.") + field + " is not a list";
        }
      }
      if (std::string_view(field) == "containers") {
        if (auto m = resource_limit(c, "memory")) {
          mem_sum += std::min<std::uint64_t>(*m, 1ULL << 62);
          any_mem = true;
        }
        if (auto g = resource_limit(c, "nvidia.com/gpu")) f.gpus += std::min<std::uint64_t>(*g, 1 << 20);
      }
    }
  }
  if (auto pod_mem = resource_limit(*spec, "memory")) {
    f.memory_limit = pod_mem;
  } else if (any_mem) {
    f.memory_limit = mem_sum;
  }
  return f;
}

// The sizeLimit of the volume behind a user's /dev/shm mount, when it is a sized emptyDir.
std::optional<std::uint64_t> existing_shm_size(const json* spec, const json& mount) {
  const json* name = child(mount, "name");
  const json* vols = spec ? child(*spec, "volumes") : nullptr;
  if (!name || !name->is_string() || !vols || !vols->is_array()) return std::nullopt;
  for (const auto& v : *vols) {
    const json* n = child(v, "name");
    if (!n || *n != *name) continue;
    const json* ed = object_at(v, "emptyDir");
    if (!ed) return std::nullopt;
    std::string raw;
    if (!string_value(*ed, "sizeLimit", raw)) return std::nullopt;
    auto q = sizing::parse_quantity(raw);
    if (!q.ok || q.negative) return std::nullopt;
    return q.bytes;
  }
  return std::nullopt;
}

sizing::SizingInput read_sizing(const json* ann, const PodFacts& facts,
                                std::vector<std::string>& warnings) {
  sizing::SizingInput in;
  in.batch_size = int_annotation(ann, kBatchSizeKey, false, warnings);
  in.num_workers = int_annotation(ann, kNumWorkersKey, true, warnings);
  in.sample_size = quantity_annotation(ann, kSampleSizeKey, warnings);
  in.prefetch_factor = int_annotation(ann, kPrefetchKey, false, warnings);
  in.procs = int_annotation(ann, kProcsKey, false, warnings);
  in.explicit_size = quantity_annotation(ann, kSizeKey, warnings);
  if (!in.procs && facts.gpus > 0) {
    in.procs = facts.gpus;
    in.procs_from_gpus = true;
  }
  in.memory_limit = facts.memory_limit;
  return in;
}

bool has_sizing_hints(const sizing::SizingInput& in) {
  return in.explicit_size.has_value() || sizing::has_formula_inputs(in);
}

// Adds `value` at `path` + "/" + key of `parent`: an "add" when the key is absent, a "replace"
// when it holds null; `append` adds to an existing array instead.
void add_or_append(json& ops, const json& parent, const std::string& path, const char* key, json value,
                   const json& element) {
  auto it = parent.find(key);
  const std::string where = path + "/" + key;
  if (it == parent.end()) {
    ops.push_back({{"op", "add"}, {"path", where}, {"value", std::move(value)}});
  } else if (it->is_array()) {
    ops.push_back({{"op", "add"}, {"path", where + "/-"}, {"value", element}});
  } else {
    ops.push_back({{"op", "replace"}, {"path", where}, {"value", std::move(value)}});
  }
}

json build_patch(const json& pod, const config::SelectionConfig& sel, const std::string& size_text,
                 const std::string& explanation) {
  json ops = json::array();
  const json annotations = {{kInjectedSizeKey, size_text}, {kSizingKey, explanation}};
  auto md = pod.find("metadata");
  if (md == pod.end()) {
    ops.push_back({{"op", "add"}, {"path", "/metadata"}, {"value", {{"annotations", annotations}}}});
  } else if (!md->is_object()) {
    ops.push_back({{"op", "replace"}, {"path", "/metadata"}, {"value", {{"annotations", annotations}}}});
  } else {
    auto an = md->find("annotations");
    if (an == md->end()) {
      ops.push_back({{"op", "add"}, {"path", "/metadata/annotations"}, {"value", annotations}});
    } else if (!an->is_object()) {
      ops.push_back({{"op", "replace"}, {"path", "/metadata/annotations"}, {"value", annotations}});
    } else {
      for (const auto& [k, v] : annotations.items())
        ops.push_back({{"op", "add"}, {"path", "/metadata/annotations/" + escape_pointer_token(k)}, {"value", v}});
    }
  }
  const json& spec = pod.at("spec");
  const json volume = {{"name", kVolumeName}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", size_text}}}};
  add_or_append(ops, spec, "/spec", "volumes", json::array({volume}), volume);
  const json mount = {{"name", kVolumeName}, {"mountPath", kShmPath}};
  for (const char* field : managed_container_fields(sel)) {
    auto list = spec.find(field);
    if (list == spec.end() || !list->is_array()) continue;
    for (std::size_t i = 0; i < list->size(); ++i) {
      add_or_append(ops, (*list)[i], std::string("/spec/") + field + "/" + std::to_string(i), "volumeMounts",
                    json::array({mount}), mount);
    }
  }
  return ops;
}

}  // namespace

InjectResult inject_pod(const json& pod, const config::Config& cfg, const InjectOptions& opts) {
  InjectResult r;
  auto rec = recognize(pod, cfg.selection, opts.assume_training);
  r.because = rec.because;
  r.warnings = std::move(rec.warnings);
  switch (rec.verdict) {
    case Verdict::kOptedOut:
      r.reason = "opted-out";
      r.summary = "skipped: " + rec.because;
      return r;
    case Verdict::kHostIPC:
      r.reason = "host-ipc";
      r.summary = "skipped: hostIPC uses the node's /dev/shm";
      return r;
    case Verdict::kNotTraining:
      r.reason = "not-training";
      r.summary = "skipped: not a training pod";
      return r;
    case Verdict::kTraining:
      break;
  }

  const json* meta = object_at(pod, "metadata");
  const json* ann = meta ? object_at(*meta, "annotations") : nullptr;
  const json* spec = object_at(pod, "spec");
  PodFacts facts = gather(pod, spec, ann);
  if (facts.already_injected) {
    r.reason = "already-injected";
    r.summary = "skipped: already injected";
    return r;
  }
  if (!facts.invalid.empty()) {
    r.reason = "invalid-pod";
    r.summary = "skipped: " + facts.invalid;
    r.warnings.push_back("shmguard left the pod unchanged: " + facts.invalid);
    return r;
  }

  auto in = read_sizing(ann, facts, r.warnings);
  if (facts.shm_volume_mount) {
    r.action = Action::kUserManaged;
    r.reason = "user-managed";
    r.existing_size = existing_shm_size(spec, *facts.shm_volume_mount);
    if (has_sizing_hints(in)) {
      auto s = sizing::compute_size(in, cfg.sizing);
      if (r.existing_size && *r.existing_size < s.bytes) {
        r.too_small = true;
        r.warnings.push_back("/dev/shm is mounted with sizeLimit " + format_quantity(*r.existing_size) +
                             " but the annotations need " + format_quantity(s.bytes));
        r.summary = "too small: has " + format_quantity(*r.existing_size) + ", needs " +
                    format_quantity(s.bytes);
      }
      r.sizing = std::move(s);
    }
    if (!r.too_small) {
      r.summary = "ok: /dev/shm already mounted" +
                  (r.existing_size ? " (" + format_quantity(*r.existing_size) + ")" : std::string());
    }
    return r;
  }

  auto s = sizing::compute_size(in, cfg.sizing);
  for (auto& w : s.warnings) r.warnings.push_back(w);
  const std::string size_text = format_quantity(s.bytes);

  r.patch = build_patch(pod, cfg.selection, size_text, s.explanation);
  if (opts.build_patched) r.patched = pod.patch(r.patch);
  r.action = Action::kInjected;
  r.reason = "injected";
  r.summary = "would inject " + size_text;
  r.sizing = std::move(s);
  return r;
}

}  // namespace shmguard::inject
