// shmguard configuration: an immutable struct with the defaults of docs/webhook.md "Configuration",
// read from a YAML file with yaml-cpp (the server re-reads it when the file changes and swaps in a new one).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/launchers.h"
#include "base/result.h"
#include "sizing/formula.h"

namespace shmguard::config {

using SizingConfig = sizing::Params;

struct SelectionConfig {
  // "key" (any value) or "key=value". Kubeflow Trainer's initializer steps carry the ancestor-step
  // key too, with their own values, and run no DataLoader.
  std::vector<std::string> label_keys{
      "training.kubeflow.org/job-name",
      "training.kubeflow.org/replica-type",
      "trainer.kubeflow.org/trainjob-ancestor-step=trainer",
  };
  // Globs over the image repository (registry and path, without tag or digest); '*' spans '/'.
  std::vector<std::string> image_globs{"*pytorch*"};
  // What a regular container runs (command and args, shell scripts included): a line starting one
  // of these PyTorch launchers or trainers is a training pod. The first word is the program ("python"
  // stands for any python3.x), the others follow it in order. A Python line passing DataLoader
  // workers above 0 (--num-workers, --num_workers, --workers) is one too.
  // The default is every row's of base/launchers.h, the one list of the launchers shmguard knows.
  std::vector<std::string> commands = default_launcher_commands();
  // Serving programs and images: an image whose repository contains one of these names, or a
  // container running one (its program, or `python -m <name>...`), is never a training pod by the
  // image rule (pytorch/torchserve is an inference server). A serving command line with a tensor
  // parallel degree is sized as inference instead (InferenceConfig).
  std::vector<std::string> serving_names{
      "torchserve", "vllm", "text-generation-launcher", "text-generation-inference", "tritonserver", "sglang",
  };
  // Resource names (globs) whose limits count accelerators: procs when nothing else says, and the
  // accelerators an inference pod's tensor parallel degree needs.
  std::vector<std::string> accelerators{
      "nvidia.com/gpu", "nvidia.com/*", "amd.com/gpu", "habana.ai/gaudi", "aws.amazon.com/neuroncore",
      "gpu.intel.com/i915",
  };
  bool inject_init_containers = false;
  bool inject_ephemeral_containers = false;
};

// Inference servers with tensor parallel inside one pod (vLLM, SGLang, TGI): NCCL between the ranks
// of one pod goes through /dev/shm. vLLM's Kubernetes guide asks for 2Gi; not measured here.
struct InferenceConfig {
  bool enabled = true;
  std::uint64_t size = 2 * sizing::kGi;
};

// The webhook's owner lookup (docs/operators.md "Kubeflow Trainer"): a pod of a JobSet that carries no
// shmguard.io/ annotation is sized from its JobSet's (a TrainJob's spec.annotations land there).
// Needs the API server (in a cluster: the service account, `get` on jobsets); each lookup waits at
// most timeoutMs, and its answer is kept cacheSeconds.
struct OwnerLookupConfig {
  bool enabled = true;
  std::uint64_t timeout_ms = 500;
  std::uint64_t cache_seconds = 30;
};

// enforce: patch training pods. audit: never patch; answer with what would be injected.
enum class Mode { kEnforce, kAudit };

struct Config {
  Mode mode = Mode::kEnforce;
  SizingConfig sizing;
  SelectionConfig selection;
  InferenceConfig inference;
  OwnerLookupConfig owner_lookup;
};


// Parses and validates a YAML config document. Unknown keys, wrong types and inconsistent
// bounds are errors that name the key and its line. An empty document gives the defaults.
Result<Config> parse_config(std::string_view yaml_text);

// Reads and parses a config file; the error names the file.
Result<Config> load_config_file(const std::string& path);

}  // namespace shmguard::config
