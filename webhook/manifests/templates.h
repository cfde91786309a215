// Pod-template discovery: where the pod templates are inside any Kubernetes object.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inject/procs.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

// What a template reference points at: a whole Pod document (or List item), a pod template
// inside another object, an Argo Workflows template (container, script or containerSet: argo.h
// builds its pod), or a TrainJob (no template at all: trainjob.h builds its trainer pod; never
// edited).
enum class TemplateKind { kPod, kTemplate, kArgo, kTrainJob };

struct TemplateRef {
  TemplateKind template_kind = TemplateKind::kTemplate;
  std::string pointer;     // JSON pointer to the template (an object with metadata/spec)
  std::string path;        // human form: "spec.pytorchReplicaSpecs.Worker.template"; "" for a whole Pod
  std::string kind;        // kind of the resource that owns it (List items: the item's kind)
  std::string name;        // that resource's metadata.name (or generateName)
  std::string namespace_name;  // that resource's metadata.namespace
  // The kind whose operator makes the pod, as the engine is told (InjectOptions::owner_kind): the
  // owner's, or a Kubeflow training kind nested in it (an AppWrapper's PyTorchJob).
  std::string job_kind;
  bool training_kind = false;  // inside a Kubeflow training kind and not an initializer step
  std::optional<inject::OwnerProcs> owner_procs;  // the owner's nprocPerNode / numProcPerNode
  // An MPI job's launcher: MPIJob's Launcher, or the `launcher` job of a Trainer runtime with an
  // MPI policy; not when the owner runs it as a worker too (MPIJob spec.runLauncherAsWorker,
  // Trainer spec.mlPolicy.mpi.runLauncherAsNode).
  bool mpi_launcher = false;
  const YamlNode* node = nullptr;  // the template in the tree searched (while it lives); a TrainJob's object
  // What the pod is built with besides the template: kArgo, the workflow spec's volumes,
  // podMetadata and podResources (load_context fills it from `context_node`); kTrainJob, the
  // runtime object when the input holds it (else null).
  nlohmann::json context;
  const YamlNode* context_node = nullptr;  // kArgo: the workflow spec (while the tree lives)
  std::string runtime;                     // kTrainJob: the runtime it names ("ClusterTrainingRuntime/x")

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
// An Argo template is built into its pod as Argo's controller builds it (argo.h), a TrainJob (`tmpl`
// is the TrainJob object) into its trainer pod with the runtime in `ref.context` (trainjob.h).
nlohmann::json operator_pod(const nlohmann::json& tmpl, const TemplateRef& ref);

// kArgo: `ref.context` from `ref.context_node`, converted within `budget` nodes. False when it
// does not convert (the document did, so only past the budget).
bool load_context(TemplateRef& ref, std::size_t budget);

// The TrainingRuntime and ClusterTrainingRuntime objects of a document (itself, or List items).
std::vector<const YamlNode*> find_runtimes(const YamlNode* root);

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
