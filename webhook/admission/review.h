// AdmissionReview codec and handler: request body -> response body and the facts the server
// logs and counts. Knows nothing of HTTP (the server maps a kRejected body to its 400); no logging.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/reason.h"
#include "config/config.h"
#include "inject/inject.h"

namespace shmguard::admission {

// What the webhook did with a request. Strings only at the edges (logs, metric labels).
enum class Decision { kInjected, kUpdated, kAudit, kSkipped, kError, kRejected, kCount };
const char* decision_name(Decision d);

// What one admission call produced, for the HTTP layer, the log and the metrics.
struct AdmissionOutcome {
  std::string body;           // the AdmissionReview response; "" when the body was no review (kRejected)
  std::string uid;
  std::string namespace_name;
  std::string pod;            // name, or generateName + "*" for controller-made pods
  Decision decision = Decision::kSkipped;
  Reason reason = Reason::kNotAPod;  // the engine's, or why the engine was not asked (base/reason.h)
  std::string size;           // injected size, canonical quantity
  std::string procs;          // "2 from PET_NPROC_PER_NODE" when the formula sized the pod
  std::vector<std::string> warnings;
  std::uint64_t size_bytes = 0;
  std::string owner_lookup;   // the owner lookup's result ("found", "error"...); "" when none was made
  bool owner_cached = false;  // ... answered from the cache
  std::string error;          // why: the engine's internal error (kError), or what is wrong with the body (kRejected)
};

// Standard base64 with padding.
std::string base64_encode(std::string_view bytes);
// Its inverse, for clients reading a webhook's patch (`shmguard review`). Characters outside the
// alphabet (padding, line breaks) are skipped.
std::string base64_decode(std::string_view text);

// Warnings as the apiserver accepts them: no control characters, bounded length.
std::string sanitize_warning(std::string_view w);

// The label JobSet (v0.8) gives every pod of a JobSet, a TrainJob's included: the JobSet's name.
inline constexpr std::string_view kJobSetNameLabel = "jobset.sigs.k8s.io/jobset-name";

// What the server's owner lookup found for a pod of a JobSet. A TrainJob's spec.annotations reach
// its JobSet and go no further (Trainer v2.0.0, JobSet v0.8.2), so a pod that carries no shmguard.io/
// annotation of its own is sized from its JobSet's.
struct OwnerAnnotations {
  nlohmann::json annotations = nlohmann::json::object();  // the owner's shmguard.io/ annotations
  std::string from;          // "JobSet team-a/bert", for the sizing text
  std::string result;        // the metric label: found, none, not-found, forbidden, error
  bool cached = false;
  std::string warning;       // why the lookup failed, for the user; the pod is sized from its own facts
};
// (namespace, JobSet name) -> what its annotations say. Returns within the configured timeout.
using OwnerLookup = std::function<OwnerAnnotations(const std::string& ns, const std::string& jobset)>;

// The JobSet a pod belongs to by its label, when the pod carries no shmguard.io/ annotation of its
// own (its own hints always win, whole); "" otherwise: no lookup.
std::string jobset_to_ask(const nlohmann::json& pod);

// The engine a review is answered with: inject::inject_pod, or in tests one that fails.
using Engine = inject::InjectResult (*)(const nlohmann::json& pod, const config::Config& cfg,
                                        const inject::InjectOptions& opts);

// Handles one POST /mutate body. Never throws: whatever the engine (or an owner lookup) throws, a
// std::exception or not, the pod is admitted unchanged with a warning (admission/response.h
// errored). `lookup`: the server's owner lookup (empty: none).
AdmissionOutcome handle_review(std::string_view body, const config::Config& cfg, const OwnerLookup& lookup = {},
                               Engine engine = &inject::inject_pod);

}  // namespace shmguard::admission
