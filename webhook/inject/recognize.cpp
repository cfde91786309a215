// Training-pod recognition (see recognize.h).
#include "inject/recognize.h"

#include "inject/command.h"
#include "base/json_fields.h"
#include "base/text.h"

#include <algorithm>
#include <cctype>

namespace shmguard::inject {
namespace {

using nlohmann::json;


enum class Tri { kUnset, kTrue, kFalse, kInvalid };

Tri bool_value(const json* map, std::string_view key, std::string& raw) {
  auto text = map ? value_text(*map, key) : std::nullopt;
  if (!text) return Tri::kUnset;
  raw = *text;
  std::string v;
  for (char c : raw) v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "true") return Tri::kTrue;
  if (v == "false") return Tri::kFalse;
  return Tri::kInvalid;
}

// Edit distance, for "did you mean": small keys, so the plain O(n*m) table is fine.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

constexpr std::string_view kPrefix = "shmguard.io/";

void warn_unknown_keys(const json& annotations, Recognition& r) {
  for (const auto& [key, value] : annotations.items()) {
    if (key.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    if (find_annotation(key)) continue;
    std::string msg = "unknown annotation " + printable(key, 80);
    if (auto best = closest_known_key(key); !best.empty()) msg += "; did you mean " + best + "?";
    r.warn(msg + " (ignored)", key);
  }
}

}  // namespace

std::string closest_known_key(std::string_view key) {
  std::string_view best;
  std::size_t best_d = 0;
  for (const auto& row : annotation_table()) {
    const std::string_view k = row.key;
    std::size_t d = distance(key, k);
    if (best.empty() || d < best_d) best = k, best_d = d;
  }
  // Close enough to be a typo: a few edits, or the same letters without the dashes.
  auto squash = [](std::string_view s) {
    std::string o;
    for (char c : s)
      if (c != '-' && c != '_' && c != '.') o += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return o;
  };
  for (const auto& row : annotation_table())
    if (squash(row.key) == squash(key)) return std::string(row.key);
  return best_d <= 3 ? std::string(best) : std::string();
}

std::string recognition_help(const config::SelectionConfig& cfg) {
  auto list = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
    return out;
  };
  return "Training pods, besides the annotations (config selection.*; README \"What shmguard does to a pod\"):\n"
         "  labels (labelKeys)     " + list(cfg.label_keys) + "\n"
         "  images (imageGlobs)    " + list(cfg.image_globs) + "\n"
         "  commands (commands)    " + list(cfg.commands) + ";\n"
         "                         or a Python command line with --num-workers/--num_workers/--workers above 0\n"
         "  not an MPI launcher that only runs mpirun/mpiexec/horovodrun\n";
}

std::string image_repository(std::string_view image) {
  if (auto at = image.find('@'); at != std::string_view::npos) image = image.substr(0, at);
  auto slash = image.rfind('/');
  auto colon = image.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash))
    image = image.substr(0, colon);
  return std::string(image);
}

namespace {

// Rule 3 beyond shmguard.io/inject=true: any sizing annotation.
std::string sizing_annotation(const json* annotations) {
  if (!annotations) return "";
  for (const auto& row : annotation_table())
    if (row.sizing && annotations->contains(row.key)) return "annotation " + std::string(row.key);
  return "";
}

// Rule 4: "key" matches any value, "key=value" that value.
std::string label_rule(const json* labels, const config::SelectionConfig& cfg) {
  if (!labels) return "";
  for (const auto& rule : cfg.label_keys) {
    const auto eq = rule.find('=');
    const std::string key = rule.substr(0, eq);
    auto value = value_text(*labels, key);
    if (!value) continue;
    if (eq == std::string::npos || *value == rule.substr(eq + 1)) return "label " + (eq == std::string::npos ? key : rule);
  }
  return "";
}

// Rule 5: image globs over the regular containers' image repositories.
std::string image_rule(const json* spec, const config::SelectionConfig& cfg) {
  const json* containers = spec ? child(*spec, "containers") : nullptr;
  if (!containers || !containers->is_array()) return "";
  for (const auto& c : *containers) {
    const json* img = child(c, "image");
    if (!img || !img->is_string()) continue;
    const auto& image = img->get_ref<const std::string&>();
    const auto repo = image_repository(image);
    for (const auto& g : cfg.image_globs)
      if (glob_match(g, repo)) return "image " + printable(image, 120);
  }
  return "";
}

// An MPI job's launcher (the operator's labels, or the caller's knowledge offline) whose containers
// run mpirun/mpiexec/horovodrun and no PyTorch launcher or Python: it starts the ranks on the
// workers over ssh and loads no data itself.
std::string mpi_launcher_rule(const json* labels, const json* spec, const config::SelectionConfig& cfg,
                              bool mpi_launcher) {
  if (!spec) return "";
  if (!mpi_launcher && labels) {
    for (const char* key : {"training.kubeflow.org/job-role", "training.kubeflow.org/replica-type"}) {
      auto v = value_text(*labels, key);
      std::string lower;
      for (char c : v.value_or("")) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      mpi_launcher = mpi_launcher || lower == "launcher";
    }
  }
  if (!mpi_launcher || !runs_only_mpi(command_lines(*spec), cfg.commands)) return "";
  return "MPI launcher: runs only mpirun/mpiexec/horovodrun, which start the ranks on the workers";
}

}  // namespace

Recognition recognize(const json& pod, const config::SelectionConfig& cfg, bool assume_training, bool mpi_launcher) {
  Recognition r;
  const json* meta = object_at(pod, "metadata");
  const json* labels = meta ? object_at(*meta, "labels") : nullptr;
  const json* annotations = meta ? object_at(*meta, "annotations") : nullptr;
  const json* spec = object_at(pod, "spec");

  std::string label_raw, ann_raw;
  const Tri label_inject = bool_value(labels, kInjectKey, label_raw);
  const Tri ann_inject = bool_value(annotations, kInjectKey, ann_raw);
  if (label_inject == Tri::kInvalid)
    r.warn("label shmguard.io/inject \"" + printable(label_raw) + "\" is not true or false; ignored");
  if (ann_inject == Tri::kInvalid)
    r.warn("annotation shmguard.io/inject \"" + printable(ann_raw) + "\" is not true or false; ignored", kInjectKey);
  if (annotations) warn_unknown_keys(*annotations, r);

  auto decide = [&r](Verdict v, std::string because) {
    r.verdict = v;
    r.because = std::move(because);
    return r;
  };
  // 1. Opt-out wins over everything. 2. hostIPC pods share the node's /dev/shm.
  if (label_inject == Tri::kFalse) return decide(Verdict::kOptedOut, "label shmguard.io/inject=false");
  if (ann_inject == Tri::kFalse) return decide(Verdict::kOptedOut, "annotation shmguard.io/inject=false");
  if (const json* ipc = spec ? child(*spec, "hostIPC") : nullptr; ipc && ipc->is_boolean() && ipc->get<bool>())
    return decide(Verdict::kHostIPC, "hostIPC: true");
  // 3. Explicit opt-in or any sizing annotation; then templates known to be training pods.
  if (label_inject == Tri::kTrue) return decide(Verdict::kTraining, "label shmguard.io/inject=true");
  if (ann_inject == Tri::kTrue) return decide(Verdict::kTraining, "annotation shmguard.io/inject=true");
  // Whatever else is said: an MPI launcher only starts the ranks.
  if (auto why = mpi_launcher_rule(labels, spec, cfg, mpi_launcher); !why.empty())
    return decide(Verdict::kNotTraining, why);
  if (auto why = sizing_annotation(annotations); !why.empty()) return decide(Verdict::kTraining, why);
  if (assume_training) return decide(Verdict::kTraining, "template of a training job");
  // 4. Configured labels. 5. Image globs.
  if (auto why = label_rule(labels, cfg); !why.empty()) return decide(Verdict::kTraining, why);
  if (auto why = image_rule(spec, cfg); !why.empty()) return decide(Verdict::kTraining, why);
  // 6. What it runs: a PyTorch launcher or trainer, or Python with DataLoader workers.
  if (spec) {
    if (auto why = launcher_rule(command_lines(*spec), cfg.commands); !why.empty()) {
      r.command = why;
      return decide(Verdict::kTraining, "command " + why);
    }
  }
  return decide(Verdict::kNotTraining, "no training label, annotation, image or command");
}

}  // namespace shmguard::inject
