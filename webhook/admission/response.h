// The AdmissionReview responses shmguard sends, each named by what happened (the shape of
// controller-runtime's admission/response.go: Allowed, Patched, Errored). shmguard never blocks a
// pod, so every response allows it; only a body that is no AdmissionReview is refused, with no
// review at all (the server answers it with a 4xx). Each builder sets the outcome's decision,
// reason and body together, so what is sent, counted and logged cannot disagree.
#pragma once

#include <string>

#include "admission/review.h"
#include "base/reason.h"

namespace shmguard::admission {

// Who a response answers: the request's apiVersion and uid, echoed.
struct Echo {
  std::string api_version;
  std::string uid;
};

// Admitted as received, with o.warnings. `d`: kSkipped, or kAudit (a warning says what enforce
// mode would do).
void allowed(AdmissionOutcome& o, const Echo& to, Decision d, Reason why);

// Admitted with `patch_b64` (the JSON patch, base64) and o.warnings: kInjected or kUpdated.
void patched(AdmissionOutcome& o, const Echo& to, Decision d, Reason why, const std::string& patch_b64);

// Our failure, never the pod's: admitted unchanged, with the one warning that says so in place of
// any other; kError and kInternalError. `what` is kept for the log.
void errored(AdmissionOutcome& o, const Echo& to, std::string what);

// No review to answer: kRejected, no body, `message` for the server's 4xx (kBadRequest: the body is
// no AdmissionReview; kContentType: the server's).
AdmissionOutcome refused(Reason why, std::string message);

// The review itself: allowed, the request's apiVersion and uid echoed, the patch when there is one,
// sanitized warnings. Written by hand: it is small and fixed in shape, and this is the hot path.
std::string encode_response(const Echo& to, const std::string& patch_b64, const std::vector<std::string>& warnings);

}  // namespace shmguard::admission
