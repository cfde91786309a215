// Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1) as the pod its trainer nodes get.
// A TrainJob has no pod template: Trainer v2.0 builds a JobSet from the runtime its
// spec.runtimeRef names and applies the TrainJob's spec.trainer to the runtime's trainer job
// (kubeflow/trainer v2.0.0 pkg/runtime/framework/plugins/jobset/builder.go Trainer(), torch.go
// EnforceMLPolicy()). This unit builds that pod, from the runtime when the input holds it, from
// spec.trainer alone otherwise.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace shmguard::manifests::trainjob {

// Trainer's names: the label on the runtime's trainer job and its container.
inline constexpr const char* kAncestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step";
inline constexpr const char* kTrainerContainer = "node";

bool is_trainjob(std::string_view api_version, std::string_view kind);
bool is_runtime(std::string_view api_version, std::string_view kind);

// How a runtime is named between a TrainJob's runtimeRef and the runtime itself:
// "ClusterTrainingRuntime/torch-distributed", "TrainingRuntime/my-runtime".
std::string runtime_name(const nlohmann::json& object);   // of a runtime object
std::string referenced_runtime(const nlohmann::json& trainjob);  // a TrainJob's spec.runtimeRef

// The pod of the TrainJob's trainer nodes: `runtime` (a TrainingRuntime or
// ClusterTrainingRuntime object, or null when the input does not hold it) with the TrainJob's
// spec.trainer applied (image, command, args, resourcesPerNode, env; PET_NPROC_PER_NODE as
// Trainer's torch plugin sets it), spec.labels and spec.annotations as the pod's (shmguard's
// webhook carries them to the trainer pods), and the trainer step's label.
nlohmann::json build_pod(const nlohmann::json& trainjob, const nlohmann::json& runtime);

// The process count Trainer's torch plugin sets as PET_NPROC_PER_NODE: spec.trainer.numProcPerNode
// (else the runtime's mlPolicy.torch.numProcPerNode, else "auto") worked through
// resourcesPerNode as calculateNumProcPerNode does ("auto" on a node without GPUs and "cpu"
// count CPUs). Exposed for tests.
std::string torch_procs(const nlohmann::json& trainer, const nlohmann::json& runtime);

}  // namespace shmguard::manifests::trainjob
