// The injection engine: pod JSON + Config -> decision, size, patched pod, JSON patch, warnings.
// Pure: no I/O, no logging. The webhook, `mutate` and `check` all call inject_pod(). The decision
// is inject.cpp; what it reads off the pod, pod_facts.h; the patch it builds, shm_patch.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/reason.h"
#include "config/config.h"
#include "inject/pod_facts.h"  // kVolumeName: the volume shmguard adds
#include "inject/procs.h"
#include "inject/recognize.h"
#include "sizing/formula.h"

namespace shmguard::inject {

enum class Action {
  kInjected,        // patch adds the volume, mounts and annotations
  kUpdated,         // shmguard's own volume is there; patch brings its size, mounts, annotations up to date
  kSkipped,         // not a training pod, opted out, hostIPC, already injected, invalid
  kUserManaged,     // a container already mounts /dev/shm; `too_small` tells if it is enough
};

struct InjectOptions {
  bool assume_training = false;  // Kubeflow templates offline: the operator labels pods later
  std::optional<OwnerProcs> owner_procs;  // offline: the owner's nprocPerNode / numProcPerNode
  bool mpi_launcher = false;  // offline: an MPIJob's Launcher template (the operator labels the pod later)
  std::string owner_kind;     // offline: the kind owning the template ("PyTorchJob", "JAXJob")
  // The webhook: shmguard.io/ annotations of the pod's owner (its JobSet, where a TrainJob's
  // spec.annotations stop), read where the pod has none of its own; `inherited_from` names the
  // owner ("JobSet team-a/bert") in the sizing text. The patch still applies to the pod as received.
  const nlohmann::json* inherited = nullptr;
  std::string inherited_from;
};

struct InjectResult : Warnings {  // warnings: recognition's, then the sizing's
  Action action = Action::kSkipped;
  // Why, in one word (base/reason.h: the engine's rows, kInjected to kNoneNeeded); set on every path.
  Reason reason = Reason::kNotTraining;
  std::string because;                        // why it was recognised (or not)
  std::optional<sizing::SizingResult> sizing; // when a size was computed
  std::optional<std::uint64_t> existing_size; // the /dev/shm sizeLimit already there, when known
  bool too_small = false;                     // user-managed /dev/shm below what the annotations need
  bool stale = false;                         // shmguard's own volume with another size (or unmounted)
  std::string summary;                        // one line for reports and logs
  // RFC 6902 operations that apply to exactly the object received: equivalent to
  // json::diff(original, patched), built directly because the webhook's latency budget is
  // spent mostly on copies and comparisons otherwise.
  nlohmann::json patch = nlohmann::json::array();

  bool mutated() const { return action == Action::kInjected || action == Action::kUpdated; }
  std::uint64_t size() const { return sizing ? sizing->bytes : 0; }
};

// `pod` is a Pod or a pod template (anything with metadata and spec).
InjectResult inject_pod(const nlohmann::json& pod, const config::Config& cfg,
                        const InjectOptions& opts = {});

}  // namespace shmguard::inject
