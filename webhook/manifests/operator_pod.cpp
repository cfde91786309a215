// The pod an operator creates from a template found offline, as the API server would send it for
// admission (see operator_pod in templates.h): named, labelled and given the process count as its
// operator does; an Argo template's and a TrainJob's built by argo.h and trainjob.h.
#include <algorithm>

#include "base/json_fields.h"
#include "base/text.h"
#include "inject/procs.h"
#include "inject/recognize.h"
#include "manifests/argo.h"
#include "manifests/kuberay.h"
#include "manifests/templates.h"
#include "manifests/trainjob.h"

namespace shmguard::manifests {

using nlohmann::json;

json operator_pod(const json& tmpl, const TemplateRef& ref) {
  if (ref.template_kind == TemplateKind::kPod) return tmpl;
  if (ref.template_kind == TemplateKind::kArgo) {
    std::string name = ref.name;
    if (name.ends_with("*")) name.pop_back();
    if (name.ends_with("-")) name.pop_back();
    return argo::build_pod(tmpl, ref.context, name);
  }
  if (ref.template_kind == TemplateKind::kTrainJob) return trainjob::build_pod(tmpl, ref.context);
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", tmpl.value("spec", json::object())}};
  if (kuberay::is_group_template(ref.path)) kuberay::add_shared_mem(pod);
  json md = tmpl.value("metadata", json::object());
  if (!md.is_object()) md = json::object();
  if (!md.contains("name") && !md.contains("generateName")) md["generateName"] = (ref.name.empty() ? "pod" : ref.name) + "-";
  if (ref.training_kind) {
    if (!md.contains("labels") || !md["labels"].is_object()) md["labels"] = json::object();
    json& labels = md["labels"];
    const std::string job_label(inject::kOperatorJobLabel);
    if (!labels.contains(job_label)) labels[job_label] = ref.name.empty() ? "job" : ref.name;
    // The training operator names itself on its pods ("jaxjob-controller"); Trainer's are JobSet's.
    if (is_training_kind("kubeflow.org/v1", ref.job_kind) && !labels.contains("training.kubeflow.org/operator-name"))
      labels["training.kubeflow.org/operator-name"] = lowercase(ref.job_kind) + "-controller";
    if (ref.mpi_launcher && !md["labels"].contains("training.kubeflow.org/job-role"))
      md["labels"]["training.kubeflow.org/job-role"] = "launcher";
  }
  if (ref.training_kind && ref.owner_procs && pod["spec"].contains("containers") && pod["spec"]["containers"].is_array()) {
    for (auto& c : pod["spec"]["containers"]) {
      if (!c.is_object()) continue;
      json& env = c["env"];
      if (!env.is_array()) env = json::array();
      const bool has = std::any_of(env.begin(), env.end(), [](const json& e) {
        return str_field(e, "name") == inject::kProcsEnv;
      });
      if (!has) env.push_back({{"name", inject::kProcsEnv}, {"value", ref.owner_procs->value}});
    }
  }
  pod["metadata"] = md;
  return pod;
}

}  // namespace shmguard::manifests
