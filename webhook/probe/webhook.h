// Asking a running webhook directly (through kubectl port-forward, or a local `serve`) what it
// decides for a pod: the AdmissionReview the API server would send, POSTed over HTTPS with
// cpp-httplib's client, the certificate verified against a CA and a server name as kube-apiserver
// does; and how the answer reads.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "probe/url.h"

namespace shmguard::probe {

// The AdmissionReview (CREATE, dry run) the API server sends for `pod` in namespace `ns`; `n`
// numbers its uid.
nlohmann::json review_for(const nlohmann::json& pod, const std::string& ns, std::size_t n);

// "patched: /dev/shm 8Gi" when the pod (as admitted) mounts shmguard's volume, else empty.
std::string injected_decision(const nlohmann::json& admitted_pod);

// "patched: /dev/shm 8Gi", "patched", "allowed unchanged" or "denied", as the API server would store it.
std::string decision_of(const nlohmann::json& pod, bool allowed, const nlohmann::json& patch);

// What the webhook answered for one pod. Past `status` and `body`, filled only for HTTP 200.
struct WebhookAnswer {
  int status = 0;
  std::string body;
  bool allowed = false;
  nlohmann::json patch;  // the decoded JSON patch, or null
  nlohmann::json warnings = nlohmann::json::array();
  std::string decision;  // decision_of
};
WebhookAnswer read_answer(const nlohmann::json& pod, int status, std::string body);

struct WebhookTarget {
  std::string server;       // the URL as given, for messages
  Url url;
  std::string server_name;  // the name the certificate must be valid for (and SNI)
  std::string ca_file;
  int timeout_s = 10;
};

// One kept-alive connection to the webhook; ask() sends one pod. Its failure says why no answer came.
class WebhookClient {
 public:
  explicit WebhookClient(WebhookTarget target);
  ~WebhookClient();
  WebhookClient(const WebhookClient&) = delete;
  WebhookClient& operator=(const WebhookClient&) = delete;
  Result<WebhookAnswer> ask(const nlohmann::json& pod, const std::string& ns);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shmguard::probe
