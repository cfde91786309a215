// The injection engine: pod JSON + Config -> decision, size, patched pod, JSON patch, warnings.
// Pure: no I/O, no logging. The webhook, `mutate` and `check` all call inject_pod().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "inject/recognize.h"
#include "sizing/formula.h"

namespace shmguard::inject {

inline constexpr const char* kVolumeName = "shmguard-dshm";
inline constexpr const char* kShmPath = "/dev/shm";

enum class Action {
  kInjected,        // patch adds the volume, mounts and annotations
  kSkipped,         // not a training pod, opted out, hostIPC, already injected, invalid
  kUserManaged,     // a container already mounts /dev/shm; `too_small` tells if it is enough
};

struct InjectOptions {
  bool assume_training = false;  // Kubeflow templates offline: the operator labels pods later
  bool build_patched = true;     // also return the patched object (the webhook only needs the patch)
};

struct InjectResult {
  Action action = Action::kSkipped;
  // Stable machine-readable reason: injected, opted-out, host-ipc, not-training,
  // already-injected, user-managed, invalid-pod.
  std::string reason;
  std::string because;                        // why it was recognised (or not)
  std::optional<sizing::SizingResult> sizing; // when a size was computed
  std::optional<std::uint64_t> existing_size; // user-managed /dev/shm sizeLimit, when known
  bool too_small = false;                     // user-managed /dev/shm below what the annotations need
  std::vector<std::string> warnings;
  std::string summary;                        // one line for reports and logs
  nlohmann::json patched;                     // the mutated object (kInjected and build_patched)
  // RFC 6902 operations that apply to exactly the object received: equivalent to
  // json::diff(original, patched), built directly because the webhook's latency budget is
  // spent mostly on copies and comparisons otherwise.
  nlohmann::json patch = nlohmann::json::array();

  bool mutated() const { return action == Action::kInjected; }
  std::uint64_t size() const { return sizing ? sizing->bytes : 0; }
};

// `pod` is a Pod or a pod template (anything with metadata and spec).
InjectResult inject_pod(const nlohmann::json& pod, const config::Config& cfg,
                        const InjectOptions& opts = {});

}  // namespace shmguard::inject
