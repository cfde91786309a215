// Training-pod recognition (see recognize.h).
#include "inject/recognize.h"

#include "inject/command_line.h"
#include "inject/procs.h"
#include "inject/serving.h"
#include "base/json_fields.h"
#include "base/text.h"

#include <algorithm>

namespace shmguard::inject {
namespace {

using nlohmann::json;


enum class Tri { kUnset, kTrue, kFalse, kInvalid };

Tri bool_value(const json* map, std::string_view key, std::string& raw) {
  auto text = map ? value_text(*map, key) : std::nullopt;
  if (!text) return Tri::kUnset;
  raw = *text;
  const std::string v = lowercase(raw);
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

void warn_unknown_keys(const json& annotations, Recognition& r) {
  for (const auto& [key, value] : annotations.items()) {
    if (key.compare(0, kAnnotationPrefix.size(), kAnnotationPrefix) != 0) continue;
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
      if (c != '-' && c != '_' && c != '.') o += c;
    return lowercase(o);
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
  return "Training pods, besides the annotations (config selection.*; docs/sizing.md \"What shmguard does to a pod\"):\n"
         "  labels (labelKeys)     " + list(cfg.label_keys) + "\n"
         "  images (imageGlobs)    " + list(cfg.image_globs) + "\n"
         "  commands (commands)    " + list(cfg.commands) + ";\n"
         "                         or a Python command line with --num-workers/--num_workers/--workers,\n"
         "                         --dataloader_num_workers or -j above 0; args that start with launcher flags\n"
         "  not serving (servingNames) " + list(cfg.serving_names) + "\n"
         "  not an MPI launcher that only runs mpirun/mpiexec/horovodrun\n"
         "  not a TFJob/JAXJob/XGBoostJob/PaddleJob/MXJob unless an image, command or annotation says PyTorch\n"
         "  none needed: 0 DataLoader workers and 1 process\n"
         "Procs from accelerators (accelerators) " + list(cfg.accelerators) + "\n"
         "Inference (config inference.*): vllm/sglang/TGI with tensor parallel N > 1 and N accelerators\n";
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
      mpi_launcher = mpi_launcher || lowercase(value_text(*labels, key).value_or("")) == "launcher";
    }
  }
  if (!mpi_launcher || !runs_only_mpi(command_lines(*spec), cfg.commands)) return "";
  return "MPI launcher: runs only mpirun/mpiexec/horovodrun, which start the ranks on the workers";
}

}  // namespace

bool is_non_pytorch_kubeflow_kind(std::string_view kind) {
  return kind == "TFJob" || kind == "JAXJob" || kind == "XGBoostJob" || kind == "PaddleJob" || kind == "MXJob";
}

namespace {

// The Kubeflow kind a pod belongs to when it is one that is not PyTorch: offline the owner's kind,
// in the cluster the controller ownerReference (kubeflow.org) or the operator-name label
// ("tfjob-controller") the training operator puts on its pods.
std::string not_pytorch_kind(const json* meta, const json* labels, const std::string& owner_kind) {
  if (is_non_pytorch_kubeflow_kind(owner_kind)) return owner_kind;
  if (const json* refs = meta ? child(*meta, "ownerReferences") : nullptr; refs && refs->is_array())
    for (const auto& ref : *refs) {
      const std::string kind = str_field(ref, "kind");
      if (str_field(ref, "apiVersion").starts_with("kubeflow.org/") && is_non_pytorch_kubeflow_kind(kind)) return kind;
    }
  if (auto op = labels ? value_text(*labels, "training.kubeflow.org/operator-name") : std::nullopt)
    for (std::string_view kind : {"TFJob", "JAXJob", "XGBoostJob", "PaddleJob", "MXJob"})
      if (lowercase(*op) == lowercase(kind) + "-controller") return std::string(kind);
  return "";
}

// The verdict and why; a training pod's rule is the command when rule 6 decided. Always true.
bool decide(Recognition& r, RecognitionVerdict v, std::string because) {
  r.verdict = v;
  r.because = std::move(because);
  if (v == RecognitionVerdict::kTraining) r.rule = r.command.empty() ? r.because : r.command;
  return true;
}

// Inference with tensor parallel: a serving command line's degree N > 1, and N accelerators.
bool inference_rule(const json& spec, const std::vector<CommandLine>& lines, const config::SelectionConfig& cfg,
                    Recognition& r) {
  auto tp = tensor_parallel(spec, lines, cfg.serving_names);
  if (!tp || tp->degree < 2) return false;
  const auto acc = accelerator_limit(spec, cfg.accelerators);
  if (acc.count < tp->degree) return false;  // ranks on other pods (or CPUs): no NCCL SHM in this one
  r.verdict = RecognitionVerdict::kInference;
  r.rule = tp->as_written;
  r.because = "inference " + tp->as_written;
  r.tensor_parallel = tp->degree;
  r.accelerators = acc.count;
  return true;
}

}  // namespace

namespace {

// Rules 1-3: what the pod itself says (opt-out, hostIPC, opt-in, an MPI launcher, a sizing
// annotation). True when one of them decided.
bool explicit_rules(Recognition& r, const json* labels, const json* annotations, const json* spec,
                    const config::SelectionConfig& cfg, bool mpi_launcher) {
  std::string label_raw, ann_raw;
  const Tri label_inject = bool_value(labels, kInjectKey, label_raw);
  const Tri ann_inject = bool_value(annotations, kInjectKey, ann_raw);
  if (label_inject == Tri::kInvalid)
    r.warn("label shmguard.io/inject \"" + printable(label_raw) + "\" is not true or false; ignored");
  if (ann_inject == Tri::kInvalid)
    r.warn("annotation shmguard.io/inject \"" + printable(ann_raw) + "\" is not true or false; ignored", kInjectKey);
  if (annotations) warn_unknown_keys(*annotations, r);
  // 1. Opt-out wins over everything. 2. hostIPC pods share the node's /dev/shm.
  if (label_inject == Tri::kFalse) return decide(r, RecognitionVerdict::kOptedOut, "label shmguard.io/inject=false");
  if (ann_inject == Tri::kFalse) return decide(r, RecognitionVerdict::kOptedOut, "annotation shmguard.io/inject=false");
  if (const json* ipc = spec ? child(*spec, "hostIPC") : nullptr; ipc && ipc->is_boolean() && ipc->get<bool>())
    return decide(r, RecognitionVerdict::kHostIPC, "hostIPC: true");
  // 3. Explicit opt-in or any sizing annotation; then templates known to be training pods.
  if (label_inject == Tri::kTrue) return decide(r, RecognitionVerdict::kTraining, "label shmguard.io/inject=true");
  if (ann_inject == Tri::kTrue) return decide(r, RecognitionVerdict::kTraining, "annotation shmguard.io/inject=true");
  // Whatever else is said: an MPI launcher only starts the ranks.
  if (auto why = mpi_launcher_rule(labels, spec, cfg, mpi_launcher); !why.empty())
    return decide(r, RecognitionVerdict::kNotTraining, why);
  if (auto why = sizing_annotation(annotations); !why.empty()) return decide(r, RecognitionVerdict::kTraining, why);
  return false;
}

// A training job's template offline: the operator labels the pods it makes, and the sizing text
// names the rule the webhook will see on them (the job-name label when it is configured).
void operator_template(Recognition& r, const json* labels, const config::SelectionConfig& cfg,
                       const std::string& owner_kind) {
  decide(r, RecognitionVerdict::kTraining, "template of a training job" + (owner_kind.empty() ? "" : " (" + owner_kind + ")"));
  json with = labels ? *labels : json::object();
  if (!with.contains(kOperatorJobLabel)) with[std::string(kOperatorJobLabel)] = "job";
  if (auto rule = label_rule(&with, cfg); !rule.empty()) r.rule = std::move(rule);
}

}  // namespace

Recognition recognize(const json& pod, const config::SelectionConfig& cfg, const RecognizeOptions& opts) {
  Recognition r;
  const json* meta = object_at(pod, "metadata");
  const json* labels = meta ? object_at(*meta, "labels") : nullptr;
  const json* annotations = opts.annotations ? opts.annotations : meta ? object_at(*meta, "annotations") : nullptr;
  const json* spec = object_at(pod, "spec");
  auto decided = [&r](RecognitionVerdict v, std::string because) {
    decide(r, v, std::move(because));
    return r;
  };
  if (explicit_rules(r, labels, annotations, spec, cfg, opts.mpi_launcher)) return r;
  // A TFJob's or JAXJob's pods carry the same operator labels as a PyTorchJob's: only an image or
  // a command below says PyTorch for them.
  const std::string other_kind = not_pytorch_kind(meta, labels, opts.owner_kind);
  if (other_kind.empty()) {
    if (opts.assume_training) {
      operator_template(r, labels, cfg, opts.owner_kind);
      return r;
    }
    // 4. Configured labels.
    if (auto why = label_rule(labels, cfg); !why.empty()) return decided(RecognitionVerdict::kTraining, why);
  }
  const auto lines = spec ? command_lines(*spec) : std::vector<CommandLine>{};
  // 5. Image globs, unless the pod serves (pytorch/torchserve is an inference server).
  const std::string serving = spec ? serving_name(*spec, lines, cfg.serving_names) : "";
  if (serving.empty())
    if (auto why = image_rule(spec, cfg); !why.empty()) return decided(RecognitionVerdict::kTraining, why);
  // 6. What it runs: a PyTorch launcher or trainer, or Python with DataLoader workers.
  if (auto why = launcher_rule(lines, cfg.commands); !why.empty() && serving.empty()) {
    r.command = why;
    return decided(RecognitionVerdict::kTraining, "command " + why);
  }
  if (opts.inference && spec && !serving.empty() && inference_rule(*spec, lines, cfg, r)) return r;
  if (!other_kind.empty()) {
    r.not_pytorch_kind = other_kind;
    return decided(RecognitionVerdict::kNotTraining, other_kind + ", and no PyTorch image, command or annotation");
  }
  return decided(RecognitionVerdict::kNotTraining, "no training label, annotation, image or command");
}

}  // namespace shmguard::inject
