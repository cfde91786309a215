// How to reach the API server as the user does with kubectl: a kubeconfig (--kubeconfig,
// $KUBECONFIG, ~/.kube/config; its current context or --context) with client certificates,
// bearer tokens (inline or tokenFile) or an exec credential plugin; inside a pod, the service
// account (as client-go's rest.InClusterConfig). And a small GET client over TLS for it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"

namespace shmguard::kube {

// Where a pod's service account finds the API server's CA and its token (as client-go's
// rest.InClusterConfig reads them).
inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount/";

struct Access {
  std::string where;          // "context admin@test in /root/.kube/config", for messages
  std::string host;
  int port = 443;
  std::string base_path;      // a server URL's path, if any ("/k8s/clusters/c-1")
  std::string ca_pem;         // the CA the server's certificate must chain to ("" : the system's)
  bool insecure = false;      // insecure-skip-tls-verify
  std::string client_cert_pem, client_key_pem;
  std::string token;
};

// A bearer token file (a kubeconfig's tokenFile, a service account's projected token): read whole,
// the line break at its end dropped. Read on every use where the kubelet rotates it in place. The
// failure names `what` and the file; an empty token is one.
Result<std::string> read_token(const std::string& path, const std::string& what);

// `kubeconfig`/`context`: the flags ("" for the defaults).
Result<Access> load_access(const std::string& kubeconfig, const std::string& context);

struct Response {
  int status = 0;
  nlohmann::json body;        // parsed JSON (a Status object for errors), or null
  std::string text;           // the body as received, for messages when it is not JSON
};

// GET `path` (with query) from the API server. A transport failure is a Failure naming the
// server; any HTTP status is a Response (the caller says what a 403 means for it).
// `raw`: leave `body` null and the caller parses `text` (a large list, parsed with a filter).
Result<Response> get(const Access& access, const std::string& path, int timeout_s, bool raw = false);

// GET with a deadline in milliseconds for each of connecting, sending and receiving (the webhook's
// owner lookup, inside an admission call).
Result<Response> get_within(const Access& access, const std::string& path, long timeout_ms);

// POST a JSON body (an Event) to `path`; as get.
Result<Response> post(const Access& access, const std::string& path, const nlohmann::json& body, int timeout_s);

// The same credentials (the bearer token) aimed at a kubelet: `host`:`port`, verified against
// `ca_pem` unless `insecure` (kubelets often serve self-signed certificates, as metrics-server's
// --kubelet-insecure-tls allows).
Access at_kubelet(const Access& access, const std::string& host, int port, const std::string& ca_pem, bool insecure);

// The message of an API error response: the Status's message, else the body.
std::string error_message(const Response& r);

}  // namespace shmguard::kube
