// Whether a running pod has the /dev/shm shmguard would give it, and if not why (docs/monitoring.md "Pods
// shmguard missed"). The engine judges the pod as it runs now, exactly as the webhook would judge
// it at creation: a training pod it would still inject is one the webhook never answered for. The
// reason comes from the MutatingWebhookConfiguration the API server uses (when it was made, its
// selectors) and the pod's namespace labels. Pure: JSON in, a verdict out.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/enum_table.h"
#include "config/config.h"

namespace shmguard::monitor {

enum class Unprotected : std::uint8_t {
  kNo,                    // shmguard's volume, a user's own big enough, or no /dev/shm needed
  kBeforeInstall,         // created before the webhook configuration existed
  kFailedOpen,            // created after, selected, yet never injected: admitted without an answer
  kNamespaceNotSelected,  // its namespace is outside the webhook's namespaceSelector
  kObjectNotSelected,     // its labels are outside the webhook's objectSelector
  kAuditMode,             // shmguard runs with mode: audit, which never patches
  kTooSmall,              // a /dev/shm of the user's own, below what its hints need
  kNotInjected,           // no /dev/shm from shmguard, and the webhook configuration could not be read
  kCount,
};

struct UnprotectedRow {
  Unprotected reason;
  const char* name;  // the metric label and JSON value
  const char* text;  // top's column
};

inline constexpr UnprotectedRow kUnprotectedTable[] = {
    {.reason = Unprotected::kNo, .name = "", .text = "-"},
    {.reason = Unprotected::kBeforeInstall, .name = "before-install", .text = "before install"},
    {.reason = Unprotected::kFailedOpen, .name = "failed-open", .text = "failed open"},
    {.reason = Unprotected::kNamespaceNotSelected, .name = "namespace-not-selected", .text = "namespace not selected"},
    {.reason = Unprotected::kObjectNotSelected, .name = "object-not-selected", .text = "labels not selected"},
    {.reason = Unprotected::kAuditMode, .name = "audit-mode", .text = "audit mode"},
    {.reason = Unprotected::kTooSmall, .name = "too-small", .text = "too small"},
    {.reason = Unprotected::kNotInjected, .name = "not-injected", .text = "not injected"},
};
static_assert(in_enum_order(kUnprotectedTable, &UnprotectedRow::reason, static_cast<std::size_t>(Unprotected::kCount)),
              "kUnprotectedTable: one row for every Unprotected, in its order");
const UnprotectedRow& unprotected_row(Unprotected r);

// shmguard's MutatingWebhookConfiguration as the API server uses it.
struct WebhookView {
  std::string name;     // the configuration's name
  std::string created;  // its metadata.creationTimestamp (RFC 3339, UTC: compares as text)
  nlohmann::json namespace_selector, object_selector;  // of its webhook; null matches everything
  std::string error;    // set when it could not be read, saying why
};

// What every pod is judged against, built once per cycle.
struct Judge {
  const config::Config* cfg = nullptr;
  WebhookView webhook;
  // Each namespace's labels, by name; a namespace missing here is judged by the label the API
  // server puts on every namespace (kubernetes.io/metadata.name).
  std::unordered_map<std::string, nlohmann::json> namespace_labels;
};

struct Protection {
  Unprotected reason = Unprotected::kNo;
  std::uint64_t need = 0;            // the size the engine gives the pod (0 when protected)
  std::optional<std::uint64_t> has;  // kTooSmall: the sizeLimit of the user's own /dev/shm
  std::string created;               // the pod's creationTimestamp
};

// A Kubernetes LabelSelector (matchLabels, matchExpressions with In, NotIn, Exists,
// DoesNotExist) over `labels` (an object, or null for none). A null or empty selector matches
// everything; an unknown operator matches nothing, as the API server would refuse it.
bool selector_matches(const nlohmann::json& selector, const nlohmann::json* labels);

// What the engine says of a pod, apart from what it is judged against: the costly part (a run of
// inject_pod), computed once per version of the pod (the monitor: once per watch event), while
// the webhook configuration and the namespaces' labels it is judged against are read each cycle.
struct Assessment {
  enum class Kind : std::uint8_t { kFine, kMissing, kTooSmall };
  Kind kind = Kind::kFine;           // kMissing: the engine would inject it; kTooSmall: its own is below its hints
  std::uint64_t need = 0;
  std::optional<std::uint64_t> has;  // kTooSmall: its own sizeLimit
  std::string created;               // creationTimestamp
  nlohmann::json labels;             // kMissing only (the objectSelector's input): null otherwise
};
Assessment assess_pod(const nlohmann::json& pod, const config::Config& cfg);

// An assessed pod of namespace `ns` judged against `j`.
Protection judge_assessed(const Assessment& a, const std::string& ns, const Judge& j);

// The pod (metadata, spec) judged against `j`: judge_assessed(assess_pod(pod)).
Protection judge_pod(const nlohmann::json& pod, const Judge& j);

// One sentence for the Event and top: what is missing, why, and what to do. `ns` is the pod's
// namespace.
std::string unprotected_message(const Protection& p, const std::string& ns, const Judge& j);

// The webhook configuration named `name` read from its JSON (a MutatingWebhookConfiguration): the
// webhook `entry` (pods.shmguard.io) when there, else its first.
WebhookView read_webhook_view(const nlohmann::json& configuration, const std::string& entry);

}  // namespace shmguard::monitor
