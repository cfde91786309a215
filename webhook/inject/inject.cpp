// The injection engine (see inject.h).
#include "inject/inject.h"

#include <algorithm>

#include "base/assert.h"
#include "inject/annotations.h"
#include "inject/command.h"
#include "base/json_fields.h"
#include "inject/procs.h"
#include "sizing/quantity.h"
#include "base/text.h"

namespace shmguard::inject {
namespace {

using nlohmann::json;
using sizing::format_quantity;


// The good values of the table's annotations a pod carries.
struct AnnotationValues {
  std::vector<std::pair<std::string_view, std::uint64_t>> read;
  std::optional<std::uint64_t> operator[](std::string_view key) const {
    SHMGUARD_ASSERT(find_annotation(key));  // the formula asks only for keys of the table
    for (const auto& [k, v] : read)
      if (k == key) return v;
    return std::nullopt;
  }
};

// Reading the sizing annotations: each bad value is warned about (naming the annotation, so the
// offline path can point at its line) and listed in the sizing explanation as ignored.
struct AnnotationReader {
  const json* ann;
  InjectResult& r;
  sizing::SizingInput& in;

  void bad(std::string_view key, const std::string& raw, const std::string& why) {
    r.warn(std::string(key) + " \"" + printable(raw) + "\" " + why + "; ignored", key);
    const std::string short_why = why.starts_with("is ") ? why.substr(3) : why;
    in.ignored.push_back(std::string(key.substr(key.find('/') + 1)) + " \"" + printable(raw) + "\" (" + short_why + ")");
  }

  // The text of annotation `key`; nullopt when absent, or not a scalar (warned).
  std::optional<std::string> text(std::string_view key) {
    auto v = ann ? value_text(*ann, key) : std::nullopt;
    if (!v && ann && ann->contains(key)) bad(key, "(not a string)", "is not a string");
    return v;
  }

  // A count annotation (its row says whether 0 is allowed). Values past 2^62 saturate (the formula
  // then clamps to max).
  std::optional<std::uint64_t> count(const AnnotationSpec& row, const std::string& raw) {
    auto v = sizing::parse_count(raw);
    if (!v) {
      bad(row.key, raw, "is not a whole number");
      return std::nullopt;
    }
    if (*v == 0 && !row.allow_zero) {
      bad(row.key, raw, "must be at least 1");
      return std::nullopt;
    }
    return v;
  }

  std::optional<std::uint64_t> quantity(const AnnotationSpec& row, const std::string& raw) {
    // Absurd sizes saturate: the formula then clamps to max, with its own warning.
    auto q = sizing::parse_size(raw, {.zero_ok = false, .saturate_ok = true});
    if (!q) {
      bad(row.key, raw, q.error());
      return std::nullopt;
    }
    return *q;
  }

  // Every count and quantity of the table the pod carries, read by its row's kind, in table order:
  // a bad value is warned about and left out. (shmguard.io/inject is recognition's to read; the
  // outputs are shmguard's own.) A row added to the table is read, checked and warned about here.
  AnnotationValues read_table() {
    AnnotationValues values;
    for (const auto& row : annotation_table()) {
      if (row.kind != AnnotationKind::kCount && row.kind != AnnotationKind::kQuantity) continue;
      auto raw = text(row.key);
      if (!raw) continue;
      auto v = row.kind == AnnotationKind::kCount ? count(row, *raw) : quantity(row, *raw);
      if (v) values.read.emplace_back(row.key, *v);
    }
    return values;
  }
};

// Containers whose mounts shmguard manages, as (field name) in pod spec.
std::vector<const char*> managed_container_fields(const config::SelectionConfig& sel) {
  std::vector<const char*> f{"containers"};
  if (sel.inject_init_containers) f.push_back("initContainers");
  if (sel.inject_ephemeral_containers) f.push_back("ephemeralContainers");
  return f;
}

struct PodFacts {
  std::optional<std::uint64_t> memory_limit;
  const json* shm_volume_mount = nullptr;  // first container mount at /dev/shm
  std::optional<std::size_t> owned_volume;  // index of shmguard's own volume in spec.volumes
  std::string invalid;  // why the pod cannot be patched safely
};

bool is_shm_path(const json& mount) {
  const json* p = child(mount, "mountPath");
  if (!p || !p->is_string()) return false;
  const auto& s = p->get_ref<const std::string&>();
  return s == kShmPath || (s.size() == std::string_view(kShmPath).size() + 1 && s.starts_with(kShmPath) && s.back() == '/');
}

// The bytes of a quantity the pod already holds (a memory limit, a sizeLimit); nullopt when the
// text is not a quantity or is negative.
std::optional<std::uint64_t> held_bytes(const std::string& raw) {
  auto bytes = sizing::parse_size(raw, {.zero_ok = true, .saturate_ok = true});
  return bytes ? std::optional(*bytes) : std::nullopt;
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
        if (!f.shm_volume_mount && is_shm_path(m)) f.shm_volume_mount = &m;
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

PodFacts gather(const json& pod, const json* spec) {
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
    auto raw = value_text(*ed, "sizeLimit");
    return raw ? held_bytes(*raw) : std::nullopt;
  }
  return std::nullopt;
}

// The DataLoader settings the command line states, where no annotation gave them (an annotation
// wins), named in the sizing text.
void read_command_flags(const json& spec, const config::SelectionConfig& sel, sizing::SizingInput& in,
                        InjectResult& r) {
  const LoaderFlags f = loader_flags(command_lines(spec), sel.commands);
  std::vector<std::string> used;
  auto take = [&](std::optional<std::uint64_t>& field, const LoaderFlags::Value& v) {
    if (field || !v.n) return;
    field = v.n;
    used.push_back(v.as_written);
  };
  take(in.batch_size, f.batch_size);
  take(in.num_workers, f.num_workers);
  take(in.prefetch_factor, f.prefetch_factor);
  for (const auto& w : f.warnings) r.warn(w.text, w.flag);
  if (!used.empty()) {
    std::string text = "from the command: ";
    for (std::size_t i = 0; i < used.size(); ++i) text += (i ? ", " : "") + used[i];
    in.notes.push_back(std::move(text));
  }
}

sizing::SizingInput read_sizing(const json* ann, const json& spec, const PodFacts& facts,
                                const InjectOptions& opts, const config::SelectionConfig& sel, InjectResult& r) {
  sizing::SizingInput in;
  const AnnotationValues a = AnnotationReader{ann, r, in}.read_table();
  in.batch_size = a[kBatchSizeKey];
  in.num_workers = a[kNumWorkersKey];
  in.sample_size = a[kSampleSizeKey];
  in.prefetch_factor = a[kPrefetchKey];
  const auto procs_annotation = a[kProcsKey];
  in.explicit_size = a[kSizeKey];
  in.memory_limit = facts.memory_limit;
  if (!in.explicit_size) read_command_flags(spec, sel, in, r);
  // An explicit size needs no procs. The default names them in its sizing text (docs/sizing.md "Where procs
  // comes from"); only the formula and the samples-in-flight hint use them, so only then is a
  // doubt about them worth a warning.
  if (in.explicit_size) return in;
  auto procs = count_procs(spec, procs_annotation, opts.owner_procs, sel.accelerators);
  in.procs = procs.count;
  in.procs_source = std::move(procs.source);
  in.procs_unknown = std::move(procs.unresolved);
  if (in.batch_size && in.num_workers)
    for (auto& w : procs.warnings) r.warn(std::move(w));
  else
    for (auto& w : procs.notices) r.warn(std::move(w));
  return in;
}

bool has_sizing_hints(const sizing::SizingInput& in) {
  return in.explicit_size.has_value() || sizing::has_formula_inputs(in);
}

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

const json& shm_mount() {
  static const json mount = {{"name", kVolumeName}, {"mountPath", kShmPath}};
  return mount;
}

json build_patch(const json& pod, const config::SelectionConfig& sel, const std::string& size_text,
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
      add_or_append(ops, (*list)[i], std::string("/spec/") + field + "/" + std::to_string(i), "volumeMounts", shm_mount());
    }
  }
  return ops;
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
  return std::any_of(mounts->begin(), mounts->end(), [](const json& m) { return is_shm_path(m); });
}

// A pod that already has shmguard's volume: sized again, and brought up to date when the
// annotations changed since (a manifest mutated earlier, then edited). Returns the operations;
// `stale` when the size on the volume or a container's mount is wrong.
json refresh_patch(const json& pod, const config::SelectionConfig& sel, std::size_t volume_index,
                   const sizing::SizingResult& s, bool& stale, std::string& what) {
  json ops = json::array();
  const std::string size_text = format_quantity(s.bytes);
  const json& spec = pod.at("spec");
  const std::string vol_path = "/spec/volumes/" + std::to_string(volume_index);
  const json& vol = spec.at("volumes").at(volume_index);
  const json* ed = object_at(vol, "emptyDir");
  const json* medium = ed ? child(*ed, "medium") : nullptr;
  const json* limit = ed ? child(*ed, "sizeLimit") : nullptr;
  if (!ed || !medium || *medium != "Memory") {
    ops.push_back(patch_op("replace", vol_path, shm_volume(size_text)));
    stale = true;
    what = "volume " + std::string(kVolumeName) + " is not a Memory emptyDir";
  } else if (!limit || *limit != size_text) {
    ops.push_back(patch_op(limit ? "replace" : "add", vol_path + "/emptyDir/sizeLimit", size_text));
    auto held = limit && limit->is_string() ? held_bytes(limit->get_ref<const std::string&>()) : std::nullopt;
    if (held != s.bytes) {
      stale = true;
      what = "has " + (limit && limit->is_string() ? printable(limit->get_ref<const std::string&>()) : "no sizeLimit") +
             ", needs " + size_text;
    }
  }
  for (const char* field : managed_container_fields(sel)) {
    auto list = spec.find(field);
    if (list == spec.end() || !list->is_array()) continue;
    for (std::size_t i = 0; i < list->size(); ++i) {
      const json& c = (*list)[i];
      if (mounts_volume(c, kVolumeName) || mounts_shm_path(c)) continue;
      add_or_append(ops, c, std::string("/spec/") + field + "/" + std::to_string(i), "volumeMounts", shm_mount());
      if (!stale) what = "container " + printable(c.value("name", std::string("?"))) + " does not mount it";
      stale = true;
    }
  }
  annotation_ops(pod, {{kInjectedSizeKey, size_text}, {kSizingKey, s.explanation}}, ops);
  return ops;
}

// The patch applies to exactly the object it was built from (checked where assertions are on).
[[maybe_unused]] bool applies(const json& pod, const json& patch) {
  try {
    (void)pod.patch(patch);
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

}  // namespace

namespace {

// The pod carries shmguard's own volume: sized again, brought up to date when it changed.
void refresh(const json& pod, const json* spec, const config::Config& cfg, std::size_t volume,
             sizing::SizingResult s, InjectResult& r) {
  bool stale = false;
  std::string what;
  r.patch = refresh_patch(pod, cfg.selection, volume, s, stale, what);
  const std::string size_text = format_quantity(s.bytes);
  r.existing_size = existing_shm_size(spec, shm_mount());
  r.stale = stale;
  if (r.patch.empty()) {
    r.reason = Reason::kAlreadyInjected;
    r.summary = "ok: already injected (" + size_text + ")";
  } else {
    r.action = Action::kUpdated;
    r.reason = stale ? Reason::kStale : Reason::kRefreshed;
    r.summary = stale ? "stale: " + what : "ok: injected " + size_text + "; annotations refreshed";
  }
  SHMGUARD_ASSERT(applies(pod, r.patch));
  r.sizing = std::move(s);
}

// A container already mounts something at /dev/shm: the user's; warned about when smaller than
// the size its annotations (or command) give. `s`: that size, when they give any.
void user_managed(const json* spec, const json& mount, std::optional<sizing::SizingResult> s, InjectResult& r) {
  r.action = Action::kUserManaged;
  r.reason = Reason::kUserManaged;
  r.existing_size = existing_shm_size(spec, mount);
  if (s && r.existing_size && *r.existing_size < s->bytes) {
    r.too_small = true;
    r.warn("/dev/shm is mounted with sizeLimit " + format_quantity(*r.existing_size) + " but the annotations need " +
           format_quantity(s->bytes));
    r.summary = "too small: has " + format_quantity(*r.existing_size) + ", needs " + format_quantity(s->bytes);
  }
  r.sizing = std::move(s);
  if (!r.too_small)
    r.summary = "ok: /dev/shm already mounted" +
                (r.existing_size ? " (" + format_quantity(*r.existing_size) + ")" : std::string());
}

void inject(const json& pod, const config::Config& cfg, sizing::SizingResult s, InjectResult& r) {
  const std::string size_text = format_quantity(s.bytes);
  r.patch = build_patch(pod, cfg.selection, size_text, s.explanation);
  SHMGUARD_ASSERT(applies(pod, r.patch));
  r.action = Action::kInjected;
  r.reason = Reason::kInjected;
  r.summary = "would inject " + size_text;
  r.sizing = std::move(s);
}

}  // namespace

namespace {

// A pod that says its DataLoaders load in the main process (0 workers) and runs one process puts
// nothing through /dev/shm: no batches cross processes, no NCCL between ranks. An explicit opt-in
// is still honoured.
bool needs_no_shm(const sizing::SizingInput& in, const Recognition& rec) {
  if (rec.because.starts_with("label shmguard.io/inject") || rec.because.starts_with("annotation shmguard.io/inject"))
    return false;
  return !in.explicit_size && in.num_workers == 0u && in.procs.value_or(1) == 1 && in.procs_unknown.empty();
}

// The sizing input of a serving pod with tensor parallel: the configured inference size.
sizing::SizingInput inference_sizing(const Recognition& rec, const PodFacts& facts, const config::Config& cfg) {
  sizing::SizingInput in;
  in.inference_size = cfg.inference.size;
  in.tensor_parallel = rec.tensor_parallel;
  in.memory_limit = facts.memory_limit;
  in.procs = rec.tensor_parallel;
  in.procs_source = "tensor parallel";
  in.notes.push_back("recognised by: " + rec.rule + "; " + std::to_string(rec.accelerators) + " accelerators");
  return in;
}

// The annotations recognition and the sizing read: the pod's own, over its owner's shmguard.io/
// ones when the webhook found any (kept in `merged`). Null when the pod has none.
const json* effective_annotations(const json& pod, const InjectOptions& opts, json& merged) {
  const json* meta = object_at(pod, "metadata");
  const json* own = meta ? object_at(*meta, "annotations") : nullptr;
  if (!opts.inherited || !opts.inherited->is_object() || opts.inherited->empty()) return own;
  merged = json::object();
  for (const auto& [k, v] : opts.inherited->items())
    if (k.starts_with("shmguard.io/")) merged[k] = v;
  if (own)
    for (const auto& [k, v] : own->items()) merged[k] = v;
  return &merged;
}

}  // namespace

InjectResult inject_pod(const json& pod, const config::Config& cfg, const InjectOptions& opts) {
  InjectResult r;
  json merged;
  const json* ann = effective_annotations(pod, opts, merged);
  const bool inherits = ann == &merged;
  auto rec = recognize(pod, cfg.selection,
                       RecognizeOptions{.assume_training = opts.assume_training, .mpi_launcher = opts.mpi_launcher,
                                        .owner_kind = opts.owner_kind, .inference = cfg.inference.enabled,
                                        .annotations = inherits ? ann : nullptr});
  r.because = rec.because;
  static_cast<Warnings&>(r) = Warnings{std::move(rec.warnings)};
  auto skip = [&r](Reason reason, std::string summary) {
    r.reason = reason;
    r.summary = std::move(summary);
    return r;
  };
  switch (rec.verdict) {
    case Verdict::kOptedOut: return skip(Reason::kOptedOut, "skipped: " + rec.because);
    case Verdict::kHostIPC: return skip(Reason::kHostIpc, "skipped: hostIPC uses the node's /dev/shm");
    case Verdict::kNotTraining:
      return skip(Reason::kNotTraining, rec.not_pytorch_kind.empty() ? "skipped: not a training pod"
                                                               : "skipped: not PyTorch (" + rec.not_pytorch_kind + ")");
    case Verdict::kTraining:
    case Verdict::kInference: break;
  }
  const json* spec = object_at(pod, "spec");
  PodFacts facts = gather(pod, spec);
  if (!facts.invalid.empty()) {
    r.warn("shmguard left the pod unchanged: " + facts.invalid);
    return skip(Reason::kInvalidPod, "skipped: " + facts.invalid);
  }
  const bool users_own = !facts.owned_volume && facts.shm_volume_mount;
  sizing::SizingInput in;
  if (rec.verdict == Verdict::kInference) {
    in = inference_sizing(rec, facts, cfg);
  } else {
    in = read_sizing(ann, *spec, facts, opts, cfg.selection, r);
    in.notes.push_back("recognised by: " + rec.rule);
    if (inherits && !opts.inherited_from.empty()) in.notes.push_back("annotations from " + opts.inherited_from);
    if (!facts.owned_volume && !users_own && needs_no_shm(in, rec)) {
      r.sizing = sizing::compute_size(in, cfg.sizing);
      return skip(Reason::kNoneNeeded, "ok: none needed (0 DataLoader workers, 1 process)");
    }
  }
  // One size for whichever branch follows: shmguard's volume and a new one are always sized; a
  // user's own /dev/shm only when something gives a size to compare it with. The formula's
  // warnings (memory limit, samples in flight) reach the user whichever branch it is.
  std::optional<sizing::SizingResult> s;
  if (!users_own || has_sizing_hints(in)) {
    s = sizing::compute_size(in, cfg.sizing);
    for (const auto& w : s->warnings) r.warn(w);
  }
  if (facts.owned_volume) refresh(pod, spec, cfg, *facts.owned_volume, std::move(*s), r);
  else if (users_own) user_managed(spec, *facts.shm_volume_mount, std::move(s), r);
  else inject(pod, cfg, std::move(*s), r);
  return r;
}

}  // namespace shmguard::inject
