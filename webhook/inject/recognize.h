// Training-pod recognition: the ordered rules of README "What shmguard does to a pod" as a pure predicate over pod JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "inject/annotations.h"

namespace shmguard::inject {

enum class Verdict { kTraining, kOptedOut, kHostIPC, kNotTraining };

// A warning for the user: what it says, the annotation it is about ("" for none) and, offline, the
// line it points at (0 until the offline runner places it: the annotation's, else the template's).
struct Warning {
  std::string text;
  std::string about;
  int line = 0;
};

// The engine's warnings, in the order they were found; every output reads this one list.
struct Warnings {
  std::vector<Warning> warnings;
  void warn(std::string text, std::string_view about = {}) { warnings.push_back({std::move(text), std::string(about)}); }
};

struct Recognition : Warnings {
  Verdict verdict = Verdict::kNotTraining;
  std::string because;  // "label training.kubeflow.org/job-name", "image pytorch/pytorch:2.4", ...
  std::string command;  // when rule 6 decided: "torchrun in args", "--num-workers 32 in command"
};


// The known shmguard.io/ key closest to `key` (a typo's likely intent), or "" when none is close.
std::string closest_known_key(std::string_view key);

// `assume_training`: the caller knows the template is a training pod (Kubeflow kinds offline);
// opt-out and hostIPC still win. `mpi_launcher`: the caller knows it is an MPI job's launcher
// (MPIJob's Launcher offline); the webhook sees the operator's job-role/replica-type label.
Recognition recognize(const nlohmann::json& pod, const config::SelectionConfig& cfg,
                      bool assume_training = false, bool mpi_launcher = false);

// --help's list of what makes a training pod beyond the annotations: the label rules, image globs
// and commands of `cfg` (the defaults, unless a config file says otherwise).
std::string recognition_help(const config::SelectionConfig& cfg);

// The repository part of an image reference: tag and digest removed, registry and port kept.
std::string image_repository(std::string_view image);


}  // namespace shmguard::inject
