// `shmguard review`: asks a running webhook (through kubectl port-forward, or a local `serve`)
// what it would do with each pod template of some manifests, over HTTPS with cpp-httplib's
// client, verifying the certificate against a CA and a server name as kube-apiserver does.
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
};

// 0: every template answered; 1: the webhook rejected or failed a review; 2: bad input or no
// connection (the message names the file or the server).
int run_review(const ReviewArgs& a);

}  // namespace shmguard::cli
