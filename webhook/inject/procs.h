// How many processes in a pod run their own DataLoader: what torchrun will start, read from the
// places real jobs say it (docs/sizing.md "Where procs comes from"). Pure: pod spec in, a count, its
// source and warnings out.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shmguard::inject {

// Offline only: the owning object's process count, which its operator hands to the pods as
// PET_NPROC_PER_NODE ("PyTorchJob spec.nprocPerNode", "4").
// The env Kubeflow's operators hand torchrun the process count in.
inline constexpr const char* kProcsEnv = "PET_NPROC_PER_NODE";
// No pod starts more processes than this; larger values are capped (they only feed arithmetic).
inline constexpr std::uint64_t kMaxProcs = 1 << 20;

struct OwnerProcs {
  std::string field;
  std::string value;
  std::uint64_t gpus = 0;  // GPUs the owner gives each node (TrainJob spec.trainer.resourcesPerNode)
};

struct ProcsCount {
  std::uint64_t count = 1;
  std::string source;  // "" for the default of 1; else what gave the count, as the sizing text names it
  std::vector<std::string> warnings;
  std::vector<std::string> unresolved;  // sources that said something unusable, for the sizing text
  std::vector<std::string> notices;     // warnings given whatever the size depends on (an unset variable)
};

// The accelerators a pod's regular containers ask for: the limits of every resource matching one
// of `accelerators` (globs: "nvidia.com/gpu", "nvidia.com/*", "amd.com/gpu"), summed.
struct AcceleratorCount {
  std::uint64_t count = 0;
  std::string resource;  // what was counted ("nvidia.com/a40"); "accelerator" when several names
  std::string invalid;   // "nvidia.com/gpu limit \"x\" in container c": a limit that is not a number
};
AcceleratorCount accelerator_limit(const nlohmann::json& spec, const std::vector<std::string>& accelerators);

// `annotation`: shmguard.io/procs-per-pod when it holds a valid count (it wins). Then, first that
// gives a number: a torchrun / torch.distributed.run / torch.distributed.launch --nproc_per_node
// in a regular container's command or args (torchrun lets its flag override the env), the
// container's PET_NPROC_PER_NODE env, `owner`, the accelerator limits, 1. "gpu" and "auto" mean
// the GPU limit; "auto" and "cpu" on a CPU-only pod, placeholders and valueFrom are unknown here:
// warned, never a silent 1. A lower source asking for more processes than the chosen one is warned.
ProcsCount count_procs(const nlohmann::json& spec, std::optional<std::uint64_t> annotation,
                       const std::optional<OwnerProcs>& owner, const std::vector<std::string>& accelerators);

}  // namespace shmguard::inject
