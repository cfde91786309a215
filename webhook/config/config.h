// shmguard configuration: an immutable struct with README's defaults, read from a YAML file with
// yaml-cpp (the server re-reads it when the file changes and swaps in a new one).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
  std::vector<std::string> commands{
      "torchrun",      "python -m torch.distributed.run", "python -m torch.distributed.launch",
      "accelerate launch", "deepspeed",                   "dlrover-run",
      "tune run",      "python -m axolotl.cli.train",     "axolotl train",
      "composer",
  };
  bool inject_init_containers = false;
  bool inject_ephemeral_containers = false;
};

// enforce: patch training pods. audit: never patch; answer with what would be injected.
enum class Mode { kEnforce, kAudit };

struct Config {
  Mode mode = Mode::kEnforce;
  SizingConfig sizing;
  SelectionConfig selection;
};


// Parses and validates a YAML config document. Unknown keys, wrong types and inconsistent
// bounds are errors that name the key and its line. An empty document gives the defaults.
Result<Config> parse_config(std::string_view yaml_text);

// Reads and parses a config file; the error names the file.
Result<Config> load_config_file(const std::string& path);

}  // namespace shmguard::config
