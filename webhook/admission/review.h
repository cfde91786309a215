// AdmissionReview codec and handler: request bytes -> response bytes. No HTTP, no logging:
// the server turns the returned facts into a log line and metrics.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace shmguard::admission {

// What one admission call produced, for the HTTP layer, the log and the metrics.
struct AdmissionOutcome {
  int http_status = 200;
  std::string body;           // the AdmissionReview response, or an error message
  bool is_review = false;     // body is an AdmissionReview (status 200)
  std::string uid;
  std::string namespace_name;
  std::string pod;            // name, or generateName + "*" for controller-made pods
  std::string decision;       // injected, skipped, error, rejected
  std::string reason;         // engine reason or why the request was not processed
  std::string size;           // injected size, canonical quantity
  std::vector<std::string> warnings;
  std::uint64_t size_bytes = 0;
  std::string error;          // internal error text, when decision == "error"
};

inline constexpr std::size_t kMaxJsonDepth = 128;

// Standard base64 with padding.
std::string base64_encode(std::string_view bytes);

// Warnings as the apiserver accepts them: no control characters, bounded length.
std::string sanitize_warning(std::string_view w);

// Handles one POST /mutate body. Never throws.
AdmissionOutcome handle_review(std::string_view body, const config::Config& cfg);

}  // namespace shmguard::admission
