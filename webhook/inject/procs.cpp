// Process count per pod (see procs.h).
#include "inject/procs.h"

#include <algorithm>

#include "inject/command_line.h"
#include "base/json_fields.h"
#include "base/launchers.h"
#include "inject/recognize.h"
#include "sizing/quantity.h"
#include "base/text.h"

namespace shmguard::inject {
namespace {

using nlohmann::json;

// One place that says how many processes there are, before its value is understood.
struct Candidate {
  std::string source;  // "torchrun --nproc_per_node", "PET_NPROC_PER_NODE", ...
  std::string where;   // " in container train", for warnings
  std::string raw;     // the value as written (after env references are resolved)
  std::uint64_t gpus = 0;  // GPUs this source knows of beside the pod's limits (the owner's per node)
  bool value_from = false;  // an env var set by valueFrom: no value here (`raw` shows "(valueFrom)")
};

// "value" as warnings show it (GCC 12 warns, wrongly, about `"\"" + std::string`: built in steps).
std::string in_quotes(const std::string& value) {
  std::string out(1, '"');
  out += printable(value);
  out += '"';
  return out;
}

std::string container_name(const json& c) {
  std::string n = str_field(c, "name");
  return n.empty() ? "?" : printable(n);
}

// The launchers that start one process per GPU (or per what they are told) in a pod are the rows
// of base/launchers.h with count flags: the source's name is the launcher's and the flag's
// ("torchrun --nproc_per_node").
const LauncherRow* launcher_of(const std::string& word) {
  const std::string_view base = program_name(word);
  for (const auto& l : launcher_table())
    for (auto p : l.programs)
      if (base == p || word == p) return &l;
  return nullptr;
}

// What a command or args item must contain for a launcher in it to give a count: a launcher's
// program or count flag. The shortest of them (none holds another), built once from the table.
const std::vector<std::string_view>& launcher_needles() {
  static const std::vector<std::string_view> needles = [] {
    std::vector<std::string_view> all, out;
    for (const auto& l : launcher_table()) {
      if (l.count_flags.empty()) continue;
      all.insert(all.end(), l.programs.begin(), l.programs.end());
      all.insert(all.end(), l.count_flags.begin(), l.count_flags.end());
    }
    for (auto n : all) {
      const bool covered = std::any_of(all.begin(), all.end(), [&](std::string_view o) {
        return o != n && n.find(o) != std::string_view::npos;
      });
      if (!covered && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
    return out;
  }();
  return needles;
}

// The first of `flags` given from words[from] on in the same simple command, and its value.
std::optional<std::pair<std::string_view, std::string>> flag_from(const std::vector<std::string>& words, std::size_t from,
                                                                  const std::vector<std::string_view>& flags) {
  for (std::string_view flag : flags)
    if (auto v = flag_in(words, from, flag)) return {{flag, std::move(*v)}};
  return std::nullopt;
}

// The process count a launcher in `words` is given, as a candidate. An args-only container whose
// image entrypoint is torchrun (its args open with torchrun's flags) counts as starting with it.
std::optional<Candidate> launcher_flag(const std::vector<std::string>& words, const json& container) {
  const bool entrypoint = runs_launcher_entrypoint(container);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const LauncherRow* l = i == 0 && entrypoint ? &launcher_table().front() : launcher_of(words[i]);
    if (!l || l->count_flags.empty()) continue;
    const std::size_t from = i == 0 && entrypoint ? 0 : i + 1;
    auto count = flag_from(words, from, l->count_flags);
    if (!count) continue;
    std::string raw = expand_env(count->second, container);
    std::string source = std::string(l->name) + " " + std::string(count->first);
    if (auto machines = l->divisor_flags.empty() ? std::nullopt : flag_from(words, from, l->divisor_flags)) {
      auto n = sizing::parse_count(raw);
      auto m = sizing::parse_count(expand_env(machines->second, container));
      source += " / " + std::string(machines->first);
      if (n && m && *m > 0) raw = std::to_string(*n / *m);
    }
    return Candidate{source, " in container " + container_name(container), raw};
  }
  return std::nullopt;
}

std::vector<std::string> command_words(const json& container) {
  std::vector<std::string> words;
  // A command that names no launcher is not lexed (the admission hot path).
  bool any = false;
  for (const char* field : {"command", "args"})
    if (const json* list = child(container, field); list && list->is_array())
      for (const auto& item : *list)
        for (std::string_view needle : launcher_needles())
          any = any || (item.is_string() && item.get_ref<const std::string&>().find(needle) != std::string::npos);
  if (!any) return words;
  for (const char* field : {"command", "args"}) {
    const json* list = child(container, field);
    if (!list || !list->is_array()) continue;
    for (const auto& item : *list) {
      if (!item.is_string()) continue;
      auto w = shell_words(item.get_ref<const std::string&>());
      words.insert(words.end(), w.begin(), w.end());
    }
  }
  return words;
}

// PET_NPROC_PER_NODE of a container: a literal value (env references resolved), or a note that it
// comes from elsewhere (valueFrom), which is unknown here.
std::optional<Candidate> env_value(const json& container) {
  const json* env = child(container, "env");
  if (!env || !env->is_array()) return std::nullopt;
  for (const auto& e : *env) {
    const json* name = child(e, "name");  // compared in place: most pods have a dozen env entries
    if (!name || !name->is_string() || name->get_ref<const std::string&>() != kProcsEnv) continue;
    const auto literal = env_literal(container, kProcsEnv);
    const bool value_from = !literal && child(e, "valueFrom");
    std::string raw = literal ? expand_env(*literal, container) : value_from ? "(valueFrom)" : "";
    return Candidate{std::string(kProcsEnv), " in container " + container_name(container), raw, 0, value_from};
  }
  return std::nullopt;
}

// Most limits are cpu and memory: Kubernetes' own resources (cpu, memory, ephemeral-storage,
// hugepages-*) have no domain, while an extended resource, as every accelerator is, is always
// domain/name. So a name without '/' is never one, and a glob's text before its first '*' rules
// out most others before any matching (the admission hot path looks at every limit).
bool is_accelerator(std::string_view resource, const std::vector<std::string>& accelerators) {
  if (resource.find('/') == std::string_view::npos) return false;
  return std::any_of(accelerators.begin(), accelerators.end(), [&](const std::string& g) {
    const auto star = g.find('*');
    if (star == std::string::npos) return resource == g;
    return resource.starts_with(std::string_view(g).substr(0, star)) && glob_match(g, resource);
  });
}

}  // namespace

AcceleratorCount accelerator_limit(const json& spec, const std::vector<std::string>& accelerators) {
  AcceleratorCount g;
  const json* containers = child(spec, "containers");
  if (!containers || !containers->is_array()) return g;
  for (const auto& c : *containers) {
    const json* res = object_at(c, "resources");
    const json* lim = res ? object_at(*res, "limits") : nullptr;
    if (!lim) continue;
    for (auto it = lim->begin(); it != lim->end(); ++it) {  // items() builds a string per entry
      const std::string& name = it.key();
      const json& value = *it;
      if (!is_accelerator(name, accelerators)) continue;
      std::optional<std::uint64_t> n;
      if (value.is_string()) n = sizing::parse_count(value.get_ref<const std::string&>());
      else if (value.is_number() || value.is_boolean()) n = sizing::parse_count(value.dump());  // as value_text reads it
      if (!n) {
        if (g.invalid.empty()) {
          auto raw = value_text(*lim, name);
          g.invalid = name + " limit " + in_quotes(raw.value_or("?")) + " in container " + container_name(c);
        }
        continue;
      }
      if (*n == 0) continue;
      g.count = std::min<std::uint64_t>(g.count + *n, kMaxProcs);
      g.resource = g.resource.empty() || g.resource == name ? name : "accelerator";
    }
  }
  return g;
}

namespace {

using Gpus = AcceleratorCount;

// A candidate's value as a count; nullopt with `why` when it gives none here.
std::optional<std::uint64_t> resolve(const Candidate& cand, std::uint64_t gpus, std::string& why) {
  const std::string& raw = cand.raw;
  if (cand.value_from) {
    why = "comes from valueFrom, unknown at admission";
    return std::nullopt;
  }
  if (auto n = sizing::parse_count(raw)) {
    if (*n > 0) return std::min<std::uint64_t>(*n, kMaxProcs);
    why = "must be at least 1";
    return std::nullopt;
  }
  if ((raw == "gpu" || raw == "auto") && gpus > 0) return gpus;
  if (auto name = env_reference(raw); !name.empty()) {
    why = "is the variable " + printable(name) + ", which the container's env does not set to a value";
    return std::nullopt;
  }
  if (raw == "gpu") why = "means one process per GPU, and the pod has no accelerator limit";
  else if (raw == "cpu") why = "means one process per CPU of the node, whatever its GPUs: unknown at admission";
  else if (raw == "auto") why = "on a pod without GPUs means one process per CPU of the node, unknown at admission";
  else why = "is not a number";
  return std::nullopt;
}

}  // namespace

ProcsCount count_procs(const json& spec, std::optional<std::uint64_t> annotation,
                       const std::optional<OwnerProcs>& owner, const std::vector<std::string>& accelerators) {
  ProcsCount r;
  const Gpus gpus = accelerator_limit(spec, accelerators);
  std::vector<Candidate> candidates;
  const json* containers = child(spec, "containers");
  if (containers && containers->is_array()) {
    for (const auto& c : *containers)
      if (auto f = launcher_flag(command_words(c), c)) candidates.push_back(std::move(*f));
    for (const auto& c : *containers)
      if (auto e = env_value(c)) candidates.push_back(std::move(*e));
  }
  if (owner) candidates.push_back({owner->field, "", owner->value, owner->gpus});
  if (gpus.count > 0) candidates.push_back({gpus.resource + " limit", "", std::to_string(gpus.count)});

  if (annotation) {
    r.count = *annotation;
    r.source = std::string(kProcsKey);
  }
  for (const auto& cand : candidates) {
    std::string why;
    auto n = resolve(cand, std::max(gpus.count, cand.gpus), why);
    if (!r.source.empty()) {
      // A lower source that would start more processes than shmguard sizes for.
      if (n && *n > r.count)
        r.warnings.push_back(cand.source + " " + printable(cand.raw) + cand.where + " starts more processes than " +
                             r.source + " " + std::to_string(r.count) + "; sized for " + std::to_string(r.count));
      continue;
    }
    if (n) {
      r.count = *n;
      r.source = cand.source;
      if (cand.raw == "gpu" || cand.raw == "auto")
        r.source += " " + cand.raw + (cand.gpus > gpus.count ? " (its GPUs per node)" : " (the GPU limit)");
      continue;
    }
    r.warnings.push_back(cand.source + " \"" + printable(cand.raw) + "\"" + cand.where + " " + why +
                         "; set " + std::string(kProcsKey));
    // An unset variable is never a silent fallback: said whatever the size depends on.
    if (!env_reference(cand.raw).empty()) r.notices.push_back(r.warnings.back());
    r.unresolved.push_back(cand.source + " \"" + printable(cand.raw) + "\"");
  }
  if (r.source.empty() && !gpus.invalid.empty()) {
    r.warnings.push_back(gpus.invalid + " is not a number; procs unknown, set " + std::string(kProcsKey));
    r.unresolved.push_back(gpus.invalid.substr(0, gpus.invalid.find(" in container")));
  }
  return r;
}

}  // namespace shmguard::inject
