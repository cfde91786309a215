// Training-pod recognition: the ordered rules of docs/sizing.md "What shmguard does to a pod" as a pure predicate over pod JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "inject/annotations.h"
#include "inject/warnings.h"

namespace shmguard::inject {

// The label the training operator puts on every pod of a Kubeflow job (a default label rule).
inline constexpr std::string_view kOperatorJobLabel = "training.kubeflow.org/job-name";

// kInference: a serving pod whose tensor parallel ranks share one pod (NCCL through /dev/shm).
enum class RecognitionVerdict { kTraining, kOptedOut, kHostIPC, kNotTraining, kInference };

struct Recognition : Warnings {
  RecognitionVerdict verdict = RecognitionVerdict::kNotTraining;
  std::string because;  // "label training.kubeflow.org/job-name", "image pytorch/pytorch:2.4", ...
  std::string command;  // when rule 6 decided: "torchrun in args", "--num-workers 32 in command"
  std::string rule;     // what recognised a training or inference pod, as the sizing text names it
  std::string not_pytorch_kind;  // a Kubeflow kind that is not PyTorch and nothing else said PyTorch
  std::uint64_t tensor_parallel = 0;  // kInference: the degree
  std::uint64_t accelerators = 0;     // kInference: the accelerators the pod asks for
};

struct RecognizeOptions {
  // The caller knows the template is a training pod (Kubeflow kinds offline); opt-out and hostIPC
  // still win.
  bool assume_training = false;
  // The caller knows it is an MPI job's launcher (MPIJob's Launcher offline); the webhook sees the
  // operator's job-role/replica-type label.
  bool mpi_launcher = false;
  // Offline: the kind of the object owning the template ("JAXJob"); the webhook reads the pod's
  // controller ownerReference and the training operator's operator-name label.
  std::string owner_kind;
  bool inference = true;  // config inference.enabled
  // The annotations to judge instead of the pod's own (its own merged over its owner's); null: the pod's.
  const nlohmann::json* annotations = nullptr;
};


// The known shmguard.io/ key closest to `key` (a typo's likely intent), or "" when none is close.
std::string closest_known_key(std::string_view key);

// The pod's verdict: opt-out and hostIPC first, then `opts` and the rules of DESIGN.md in order.
Recognition recognize(const nlohmann::json& pod, const config::SelectionConfig& cfg, const RecognizeOptions& opts);
inline Recognition recognize(const nlohmann::json& pod, const config::SelectionConfig& cfg,
                             bool assume_training = false, bool mpi_launcher = false) {
  RecognizeOptions opts;
  opts.assume_training = assume_training;
  opts.mpi_launcher = mpi_launcher;
  return recognize(pod, cfg, opts);
}

// A Kubeflow training-operator kind whose pods are not PyTorch's unless something else says so
// (TFJob, JAXJob, XGBoostJob, PaddleJob, MXJob).
bool is_non_pytorch_kubeflow_kind(std::string_view kind);

// --help's list of what makes a training pod beyond the annotations: the label rules, image globs
// and commands of `cfg` (the defaults, unless a config file says otherwise).
std::string recognition_help(const config::SelectionConfig& cfg);

// The repository part of an image reference: tag and digest removed, registry and port kept.
std::string image_repository(std::string_view image);


}  // namespace shmguard::inject
