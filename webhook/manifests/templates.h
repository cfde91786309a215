// Pod-template discovery: where the pod templates are inside any Kubernetes object.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inject/procs.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

// What a template reference points at: a whole Pod document (or List item), or a pod template
// inside another object.
enum class TemplateKind { kPod, kTemplate };

struct TemplateRef {
  TemplateKind template_kind = TemplateKind::kTemplate;
  std::string pointer;     // JSON pointer to the template (an object with metadata/spec)
  std::string path;        // human form: "spec.pytorchReplicaSpecs.Worker.template"; "" for a whole Pod
  std::string kind;        // kind of the resource that owns it (List items: the item's kind)
  std::string name;        // that resource's metadata.name (or generateName)
  std::string namespace_name;  // that resource's metadata.namespace
  bool training_kind = false;  // inside a Kubeflow training kind and not an initializer step
  std::optional<inject::OwnerProcs> owner_procs;  // the owner's nprocPerNode / numProcPerNode
  // An MPI job's launcher: MPIJob's Launcher, or the `launcher` job of a Trainer runtime with an
  // MPI policy; not when the owner runs it as a worker too (MPIJob spec.runLauncherAsWorker,
  // Trainer spec.mlPolicy.mpi.runLauncherAsNode).
  bool mpi_launcher = false;
  const YamlNode* node = nullptr;  // the template in the tree searched (while it lives)

  // `path` for people: "(pod)" for a whole Pod.
  std::string display_path() const { return template_kind == TemplateKind::kPod ? "(pod)" : path; }
};

// Kubeflow Trainer's label naming the step a runtime's job runs; only "trainer" runs a DataLoader.
inline constexpr const char* kTrainerStepLabel = "trainer.kubeflow.org/trainjob-ancestor-step";

// True for kinds whose templates are training pods even before their operator labels them.
bool is_training_kind(const std::string& api_version, const std::string& kind);

// The pod an operator creates from the template `tmpl` found at `ref`, as the API server sends it
// for admission: a name, and for Kubeflow training kinds the job-name label (and a launcher's
// job-role) and the PET_NPROC_PER_NODE env the operator adds. A whole Pod (TemplateKind::kPod) is itself.
nlohmann::json operator_pod(const nlohmann::json& tmpl, const TemplateRef& ref);

// A template's JSON patch (inject_pod's, paths within the template) as a patch of the document
// that holds it at `pointer`, appended to `out`.
void append_in_document(const std::string& pointer, const nlohmann::json& patch, nlohmann::json& out);

// False only when the tree `root` (no aliases) certainly holds no pod template: no mapping has a
// "containers" key with a sequence value, which every template's spec has (is_pod_template). A
// document without one is written as it came without being converted to JSON and searched: a
// ConfigMap, a Service, a CustomResourceDefinition (whose schemas' containers are mappings).
bool may_hold_templates(const YamlNode* root);

// Every pod template in the tree `root` (a document read as to_json() would read it, without
// converting it): a Pod itself, the templates of workload kinds, List items, and any
// pod-template-shaped object (an object whose spec has a containers list) elsewhere. A tree with
// aliases must have passed to_json() within its budget first: the walk expands them.
std::vector<TemplateRef> find_templates(const YamlNode* root);

}  // namespace shmguard::manifests
