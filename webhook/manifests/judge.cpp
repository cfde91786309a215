// The engine's call on one template of a document (DocumentWorker::report_template) and on a
// TrainJob's trainer pod (judge_trainjob): the pod the engine sees, its warnings placed, and for
// an Argo template the patch mapped back onto the template.
#include <algorithm>

#include "base/json_fields.h"
#include "base/text.h"
#include "inject/annotations.h"
#include "manifests/argo.h"
#include "manifests/document.h"
#include "manifests/kuberay.h"
#include "manifests/trainjob.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;

constexpr const char* kTrainJobNotWritten = "TrainJob pods get /dev/shm from the webhook or their runtime";
constexpr const char* kKubeRayNotWritten = "KubeRay mounts /dev/shm on this group's pods itself";

bool refused_value(const json& v) { return v.is_number() || v.is_boolean(); }

// Annotation values must be strings; YAML reads `64` and `true` as a number and a bool, and the
// API server refuses the object. A shmguard.io one is a finding (`rejected`, and left out of the
// pod returned, which the engine sizes), any other a warning.
json accepted_pod(const json& pod, TemplateReport& rep, const Places& places) {
  const json* md = object_at(pod, "metadata");
  const json* ann = md ? object_at(*md, "annotations") : nullptr;
  if (!ann) return pod;
  bool strip = false;
  for (const auto& [key, value] : ann->items()) {
    if (!refused_value(value)) continue;
    std::string msg = "annotation " + printable(key, 80) + ": " + value.dump() + " is " +
                      (value.is_boolean() ? "a bool" : "a number") +
                      "; kubectl would reject it (annotation values must be strings): quote it";
    if (key.starts_with(inject::kAnnotationPrefix)) {
      rep.rejected.push_back({std::move(msg), key, places.line_for(key)});
      strip = true;
    } else {
      rep.result.warn(std::move(msg), key);
    }
  }
  if (!strip) return pod;
  json accepted = pod;
  json& a = accepted["metadata"]["annotations"];
  for (auto it = a.begin(); it != a.end();)
    it = it.key().starts_with(inject::kAnnotationPrefix) && refused_value(*it) ? a.erase(it) : std::next(it);
  return accepted;
}

// The engine's result, with the annotation-type warnings found before it after its own.
void run_engine(TemplateReport& rep, const json& pod, const config::Config& cfg, const Places& places) {
  TemplateReport types;
  const json accepted = accepted_pod(pod, types, places);
  rep.result = inject::inject_pod(accepted, cfg, engine_options(rep.ref));
  for (auto& w : types.result.warnings) rep.result.warnings.push_back(std::move(w));
  rep.rejected = std::move(types.rejected);
  for (auto& w : rep.result.warnings) w.line = places.line_for(w.about);
}

}  // namespace

inject::InjectOptions engine_options(const TemplateRef& ref) {
  inject::InjectOptions opts;
  opts.assume_training = ref.training_kind && ref.template_kind != TemplateKind::kTrainJob;
  opts.owner_procs = ref.owner_procs;
  opts.mpi_launcher = ref.mpi_launcher;
  opts.owner_kind = ref.template_kind == TemplateKind::kTrainJob ? "" : ref.job_kind;
  return opts;
}

void judge_trainjob(TemplateReport& rep, const json& runtime, const config::Config& cfg) {
  auto& src = *rep.trainjob;
  rep.ref.context = runtime;
  src.runtime_seen = !runtime.is_null();
  run_engine(rep, operator_pod(src.object, rep.ref), cfg, src.places);
  if (runtime.is_null())
    rep.result.warnings.push_back({"runtime " + printable(rep.ref.runtime, 120) +
                                       " is not in the input: judged from spec.trainer alone",
                                   "", src.places.fallback});
  rep.not_written = rep.result.mutated() ? kTrainJobNotWritten : "";
  rep.result.patch = json::array();
}

TemplateReport DocumentWorker::report_template(const Place& at, int index, const TemplateRef& ref, const json& tmpl,
                                               const std::vector<std::pair<std::string, json>>& runtimes) const {
  TemplateReport rep;
  rep.file = at.file;
  rep.document = index;
  rep.ref = ref;
  load_context(rep.ref, node_budget_);  // the document converted within this budget: it cannot fail
  rep.ref.node = nullptr;  // the document does not outlive this worker's turn
  rep.ref.context_node = nullptr;
  const YamlNode* tnode = ref.node;
  const YamlNode* line_node = tnode;
  if (ref.template_kind == TemplateKind::kTrainJob)
    if (const YamlNode* t = resolve(ydoc_.root, ref.pointer + "/spec/trainer")) line_node = t;
  rep.line = at.raw.first_line + line_node->line - 1;
  if (opts_.keep_objects) rep.object = tmpl;
  if (ref.template_kind == TemplateKind::kTrainJob) {
    rep.trainjob = std::make_shared<TemplateReport::TrainJobSource>();
    rep.trainjob->object = tmpl;
    rep.trainjob->places = places_of(ydoc_.root, ref, at.raw, rep.line, true);
    const auto rt = std::find_if(runtimes.begin(), runtimes.end(), [&](const auto& r) { return r.first == ref.runtime; });
    judge_trainjob(rep, rt == runtimes.end() ? json() : rt->second, cfg_);
  } else {
    engine_call(at, rep, tmpl);
  }
  note_repeats(at, tnode, rep);
  if (opts_.retouch) opts_.retouch(rep, tmpl);
  return rep;
}

// A template's pod judged by the engine; an Argo template's patch mapped onto the template. The
// command items are gathered only when a warning is about a flag.
void DocumentWorker::engine_call(const Place& at, TemplateReport& rep, const json& tmpl) const {
  const bool argo = rep.ref.template_kind == TemplateKind::kArgo;
  TemplateRef alive = rep.ref;
  alive.node = resolve(ydoc_.root, alive.pointer);
  Places places = places_of(ydoc_.root, alive, at.raw, rep.line, false);
  // A KubeRay group's pods come with KubeRay's own /dev/shm: judged as the webhook will see them.
  json ray;
  const bool kuberay_shm = rep.ref.template_kind == TemplateKind::kTemplate && kuberay::is_group_template(rep.ref.path) &&
                           kuberay::add_shared_mem(ray = tmpl);
  run_engine(rep, argo ? operator_pod(tmpl, rep.ref) : kuberay_shm ? ray : tmpl, cfg_, places);
  if (kuberay_shm) {
    if (auto at_text = rep.result.summary.find("already mounted"); at_text != std::string::npos)
      rep.result.summary.replace(at_text, std::string_view("already mounted").size(), "mounted by KubeRay");
    if (rep.result.summary.starts_with("too small: has ")) rep.result.summary.insert(11, "KubeRay's ");
    if (rep.result.mutated()) rep.not_written = kKubeRayNotWritten;  // its patch is of the pod, not the template
    rep.result.patch = json::array();
  }
  if (any_flag_warning(rep.result.warnings)) {
    places = places_of(ydoc_.root, alive, at.raw, rep.line, true);
    for (auto& w : rep.result.warnings) w.line = places.line_for(w.about);
  }
  if (!argo || !rep.result.mutated()) return;
  std::string why;
  if (auto mapped = argo::template_patch(rep.result.patch, tmpl, rep.ref.context, why)) {
    rep.result.patch = std::move(*mapped);
  } else {
    rep.not_written = why;
    rep.result.patch = json::array();
  }
}

}  // namespace shmguard::manifests
