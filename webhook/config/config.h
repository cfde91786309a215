// shmguard configuration: an immutable struct with DESIGN.md's defaults, loaded from YAML once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sizing/quantity.h"

namespace shmguard::config {

struct SizingConfig {
  std::uint64_t prefetch_factor = 2;
  std::uint32_t headroom_milli = 1500;  // headroom x1000, kept integral so sizes are exact
  std::uint64_t base = 256 * sizing::kMi;
  std::uint64_t nccl_per_process = 64 * sizing::kMi;
  std::uint64_t min = 1 * sizing::kGi;
  std::uint64_t max = 64 * sizing::kGi;
  std::uint64_t default_size = 8 * sizing::kGi;
};

struct SelectionConfig {
  std::vector<std::string> label_keys{
      "training.kubeflow.org/job-name",
      "training.kubeflow.org/replica-type",
      "trainer.kubeflow.org/trainjob-ancestor-step",
  };
  // Globs over the image repository (registry and path, without tag or digest); '*' spans '/'.
  std::vector<std::string> image_globs{"*pytorch*"};
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

struct ConfigResult {
  bool ok = false;
  Config config;
  std::string error;
};

// Parses and validates a YAML config document. Unknown keys, wrong types and
// inconsistent bounds are errors that name the key. An empty document gives the defaults.
ConfigResult parse_config(std::string_view yaml_text);

// Reads and parses a config file; the error names the file.
ConfigResult load_config_file(const std::string& path);

// The headroom as a decimal ("1.5"), for explanations.
std::string headroom_text(std::uint32_t headroom_milli);

}  // namespace shmguard::config
