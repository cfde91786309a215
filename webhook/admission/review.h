// AdmissionReview codec and handler: request body -> response body and the facts the server
// logs and counts. Knows nothing of HTTP (the server maps a kRejected body to its 400); no logging.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace shmguard::admission {

// What the webhook did with a request. Strings only at the edges (logs, metric labels).
enum class Decision { kInjected, kUpdated, kAudit, kSkipped, kError, kRejected };
const char* decision_name(Decision d);

// What one admission call produced, for the HTTP layer, the log and the metrics.
struct AdmissionOutcome {
  std::string body;           // the AdmissionReview response; "" when the body was no review (kRejected)
  std::string uid;
  std::string namespace_name;
  std::string pod;            // name, or generateName + "*" for controller-made pods
  Decision decision = Decision::kSkipped;
  std::string reason;         // engine reason or why the request was not processed
  std::string size;           // injected size, canonical quantity
  std::string procs;          // "2 from PET_NPROC_PER_NODE" when the formula sized the pod
  std::vector<std::string> warnings;
  std::uint64_t size_bytes = 0;
  std::string error;          // why: the engine's internal error (kError), or what is wrong with the body (kRejected)
};

// Standard base64 with padding.
std::string base64_encode(std::string_view bytes);
// Its inverse, for clients reading a webhook's patch (`shmguard review`). Characters outside the
// alphabet (padding, line breaks) are skipped.
std::string base64_decode(std::string_view text);

// Warnings as the apiserver accepts them: no control characters, bounded length.
std::string sanitize_warning(std::string_view w);

// The AdmissionReview response: always allowed (shmguard never blocks a pod), the request's
// apiVersion and uid echoed, the base64 JSON patch when there is one, sanitized warnings.
std::string encode_response(const std::string& api_version, const std::string& uid, const std::string& patch_b64,
                            const std::vector<std::string>& warnings);

// Handles one POST /mutate body. Never throws.
AdmissionOutcome handle_review(std::string_view body, const config::Config& cfg);

}  // namespace shmguard::admission
