// `shmguard review`: asks a running webhook (through kubectl port-forward, or a local `serve`)
// what it would do with each pod template of some manifests, over HTTPS, verifying the
// certificate against a CA and a server name as kube-apiserver does (the clients: probe/).
// With --through-api-server it asks the API server instead: each pod is created as a server-side
// dry run (never stored), so the answer has come the whole way API server -> Service -> a webhook
// pod, and with --wait it asks again until shmguard answers (the chart's install check).
#pragma once

#include <string>
#include <vector>

namespace shmguard::cli {

struct ReviewArgs {
  std::string server;       // https://host:port[/path], path defaulting to /mutate
  std::string ca_file;      // PEM CA bundle the serving certificate must chain to
  std::string server_name;  // name the certificate must be valid for (default: the URL's host)
  std::vector<std::string> files;
  std::string output = "text";  // text or json
  int timeout_s = 10;
  bool test_pod = false;         // review a built-in PyTorch training pod instead of files
  bool expect_injected = false;  // exit 1 unless every answer mounts shmguard's /dev/shm
  // --through-api-server: `server` and `ca_file` are the API server's (default: in-cluster).
  bool through_api_server = false;
  std::string token_file;              // bearer token (default: the pod's service account token)
  std::string namespace_name = "default";  // where the dry-run pods are created
  int wait_s = 0;                      // ask again until shmguard answers, for this long
  std::string webhook_service;         // "namespace/name" of the webhook's Service, for the hint
};

// 0: every template answered; 1: the webhook rejected or failed a review; 2: bad input or no
// connection (the message names the file or the server).
int run_review(const ReviewArgs& a);

// --through-api-server (review_through_api.cpp): 0 when shmguard answered every pod (injected, with
// --expect-injected), 1 when the wait ran out or an answer was wrong, 2 on bad input.
int run_review_through_api_server(const ReviewArgs& a);

}  // namespace shmguard::cli
