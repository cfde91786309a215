// The AdmissionReview responses (see response.h).
#include "admission/response.h"

#include <nlohmann/json.hpp>

namespace shmguard::admission {

using nlohmann::json;

std::string encode_response(const Echo& to, const std::string& patch_b64, const std::vector<std::string>& warnings) {
  std::string body;
  body.reserve(256 + patch_b64.size());
  body = "{\"apiVersion\":";
  body += json(to.api_version).dump();
  body += ",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":";
  body += json(to.uid).dump(-1, ' ', false, json::error_handler_t::replace);
  body += ",\"allowed\":true";
  if (!patch_b64.empty()) {
    body += ",\"patchType\":\"JSONPatch\",\"patch\":\"";
    body += patch_b64;
    body += '"';
  }
  if (!warnings.empty()) {
    json w = json::array();
    for (const auto& s : warnings) w.push_back(sanitize_warning(s));
    body += ",\"warnings\":";
    body += w.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  body += "}}";
  return body;
}

void allowed(AdmissionOutcome& o, const Echo& to, Decision d, Reason why) {
  o.decision = d;
  o.reason = why;
  o.body = encode_response(to, "", o.warnings);
}

void patched(AdmissionOutcome& o, const Echo& to, Decision d, Reason why, const std::string& patch_b64) {
  o.decision = d;
  o.reason = why;
  o.body = encode_response(to, patch_b64, o.warnings);
}

void errored(AdmissionOutcome& o, const Echo& to, std::string what) {
  o.decision = Decision::kError;
  o.reason = Reason::kInternalError;
  o.error = std::move(what);
  o.warnings = {"shmguard internal error; pod admitted without /dev/shm sizing"};
  o.body = encode_response(to, "", o.warnings);
}

AdmissionOutcome refused(Reason why, std::string message) {
  AdmissionOutcome o;
  o.decision = Decision::kRejected;
  o.reason = why;
  o.error = std::move(message);
  return o;
}

}  // namespace shmguard::admission
