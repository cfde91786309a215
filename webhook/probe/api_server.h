// Asking through the API server what the webhook decides for a pod: the pod is created as a
// server-side dry run (`?dryRun=All`: admitted, never stored), so the answer has travelled the
// path every real pod takes: API server -> the webhook's Service -> a webhook pod.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "probe/url.h"

namespace shmguard::probe {

struct ApiServer {
  Url url;
  std::string ca_file;
  std::string token_file;
};

// The API server: `server`, `ca_file` and `token_file` when given, else what a pod's service
// account finds (KUBERNETES_SERVICE_HOST/PORT, as client-go's rest.InClusterConfig does).
Result<ApiServer> locate_api_server(const std::string& server, const std::string& ca_file,
                                    const std::string& token_file);

// `299 - "text"` (RFC 7234, as the API server sends admission warnings) -> text.
std::string warning_text(const std::string& header);

// Whether shmguard took part in an admission: it injected (`decision` non-empty), or in audit
// mode warned that it would.
bool shmguard_answered(const std::string& decision, const std::vector<std::string>& warnings);

// What one dry run came back with.
struct Attempt {
  enum class Kind { kAnswered, kUnchanged, kRefused, kUnreachable } kind = Kind::kUnreachable;
  std::string text;  // the decision, or why there was none
  std::vector<std::string> warnings;
};

// An answer of the API server: its status, body and Warning header values.
Attempt classify(int status, const std::string& body, const std::vector<std::string>& warning_headers);

// Creates `pod` (its namespace already set) in `namespace_name` as a dry run, waiting at most
// `timeout_s` to connect, send and read. The token is read on every call: it rotates.
Attempt ask_through_api(const ApiServer& api, const std::string& namespace_name, const nlohmann::json& pod,
                        int timeout_s);

}  // namespace shmguard::probe
