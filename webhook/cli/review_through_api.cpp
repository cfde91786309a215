// `shmguard review --through-api-server` (see review_command.h): each pod is created through the API server
// as a server-side dry run (`?dryRun=All`: admitted, never stored), so the answer has travelled the
// path every real pod takes: API server -> the webhook's Service -> a webhook pod. With --wait it
// asks again until shmguard answers: the chart's post-install/post-upgrade check, which makes
// `helm install --wait` return only once the next pod will be injected.
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/text.h"
#include "cli/exit_codes.h"
#include "cli/review_command.h"
#include "cli/review_parts.h"
#include "kube/access.h"

namespace shmguard::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Where a pod's service account finds the API server (as client-go's rest.InClusterConfig does).
constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount/";
constexpr auto kPause = std::chrono::milliseconds(500);  // between attempts

struct ApiServer {
  Url url;
  std::string ca_file;
  std::string token_file;
};

Result<ApiServer> locate(const ReviewArgs& a) {
  ApiServer s;
  std::string server = a.server;
  if (server.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
      return Failure{"--through-api-server outside a pod needs --server (the API server's URL), --ca and --token-file: "
                     "KUBERNETES_SERVICE_HOST/PORT are not set"};
    }
    const std::string h = host;
    server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  }
  auto url = parse_url(server, "", "--server");
  if (!url) return url.failure_part();
  s.url = *url;
  s.ca_file = a.ca_file.empty() ? std::string(kServiceAccountDir) + "ca.crt" : a.ca_file;
  s.token_file = a.token_file.empty() ? std::string(kServiceAccountDir) + "token" : a.token_file;
  return s;
}

// `299 - "text"` (RFC 7234, as the API server sends admission warnings) -> text.
std::string warning_text(const std::string& header) {
  const auto open = header.find('"');
  const auto close = header.rfind('"');
  if (open == std::string::npos || close <= open) return header;
  std::string out;
  for (std::size_t i = open + 1; i < close; ++i) {
    if (header[i] == '\\' && i + 1 < close) ++i;
    out += header[i];
  }
  return out;
}

// What one dry run came back with.
struct Attempt {
  enum class Kind { kAnswered, kUnchanged, kRefused, kUnreachable } kind = Kind::kUnreachable;
  std::string text;  // the decision, or why there was none
  std::vector<std::string> warnings;
};

bool shmguard_answered(const std::string& decision, const std::vector<std::string>& warnings) {
  if (!decision.empty()) return true;
  for (const auto& w : warnings)
    if (w.rfind("shmguard would inject", 0) == 0) return true;  // audit mode: a warning, no patch
  return false;
}

Attempt classify(const httplib::Result& res, httplib::SSLClient& cli, const ApiServer& api) {
  Attempt at;
  if (!res) {
    at.text = "cannot reach the API server at " + api.url.host + ":" + std::to_string(api.url.port) + ": " +
              httplib::to_string(res.error());
    if (long v = cli.get_openssl_verify_result(); v != 0) at.text += std::string(": ") + X509_verify_cert_error_string(v);
    return at;
  }
  for (std::size_t i = 0; i < res->get_header_value_count("Warning"); ++i)
    at.warnings.push_back(warning_text(res->get_header_value("Warning", i)));
  const json body = json::parse(res->body, nullptr, false);
  if (res->status != 200 && res->status != 201) {
    at.kind = Attempt::Kind::kRefused;
    const std::string msg = body.is_object() ? body.value("message", std::string()) : std::string();
    at.text = "the API server answered HTTP " + std::to_string(res->status) + ": " + (msg.empty() ? res->body : msg);
    return at;
  }
  at.text = injected_decision(body);
  at.kind = shmguard_answered(at.text, at.warnings) ? Attempt::Kind::kAnswered : Attempt::Kind::kUnchanged;
  if (at.kind == Attempt::Kind::kAnswered && at.text.empty()) at.text = "allowed unchanged";
  if (at.kind == Attempt::Kind::kUnchanged) at.text = "admitted without shmguard's answer (no /dev/shm volume, no shmguard warning)";
  return at;
}

Attempt ask(const ApiServer& api, const ReviewArgs& a, const json& pod, int timeout_s) {
  auto token = kube::read_token(api.token_file, "the service account token");  // read on every attempt: it rotates
  if (!token) return {Attempt::Kind::kRefused, token.error(), {}};
  httplib::SSLClient cli(api.url.host, api.url.port);
  cli.set_ca_cert_path(api.ca_file);
  cli.enable_server_certificate_verification(true);
  cli.set_connection_timeout(timeout_s, 0);
  cli.set_read_timeout(timeout_s, 0);
  cli.set_write_timeout(timeout_s, 0);
  cli.set_bearer_token_auth(*token);
  const std::string path = api.url.path + "/api/v1/namespaces/" + a.namespace_name +
                           "/pods?dryRun=All&fieldManager=shmguard-review";
  auto res = cli.Post(path, pod.dump(), "application/json");
  return classify(res, cli, api);
}

// What to look at when the wait ran out, for the last thing the API server said.
std::string hint(const ReviewArgs& a, const Attempt& last) {
  std::string svc = a.webhook_service.empty() ? "the webhook's Service" : "Service " + a.webhook_service;
  std::string endpoints = "`kubectl get endpoints` lists its ready pods";
  if (auto slash = a.webhook_service.find('/'); slash != std::string::npos)
    endpoints = "`kubectl -n " + a.webhook_service.substr(0, slash) + " get endpoints " + a.webhook_service.substr(slash + 1) +
                "` must list ready pods";
  switch (last.kind) {
    case Attempt::Kind::kUnchanged:
      return "The API server admitted the pod without shmguard: it could not call the webhook through " + svc +
             " (failurePolicy Ignore then admits pods unchanged), or the webhook's namespaceSelector does not select "
             "namespace " + a.namespace_name + ". " + endpoints +
             "; the API server's log says why (\"Failed calling webhook \\\"pods.shmguard.io\\\"\"). For a "
             "namespaceSelector that leaves " + a.namespace_name + " out, set the chart's installCheck.namespace to a "
             "namespace it selects.";
    case Attempt::Kind::kRefused:
      return "The API server refused the dry run itself: its message above says why (RBAC: the check's Role must "
             "allow `create pods` in namespace " + a.namespace_name + "; a namespace that does not exist; another "
             "webhook with sideEffects Unknown or Some, which refuses every dry run).";
    case Attempt::Kind::kUnreachable:
    case Attempt::Kind::kAnswered:
      break;
  }
  return "The pod could not reach the API server (in a pod: the `kubernetes` Service).";
}

void print_answer(const ReviewArgs& a, const PodToReview& p, const Attempt& at, double seconds, int attempts) {
  std::cout << p.where() << " -> " << at.text << " (through the API server, namespace " << a.namespace_name
            << "; answered after " << std::fixed << std::setprecision(1) << seconds << "s, attempt " << attempts << ")\n";
  for (const auto& w : at.warnings) std::cout << "    warning: " << w << "\n";
}

// One pod, asked until shmguard answers or the deadline passes.
int review_one(const ApiServer& api, const ReviewArgs& a, const PodToReview& p, Clock::time_point deadline) {
  json pod = p.pod;
  pod["metadata"]["namespace"] = a.namespace_name;
  const auto t0 = Clock::now();
  std::string said;
  for (int attempts = 1;; ++attempts) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count();
    const Attempt at = ask(api, a, pod, static_cast<int>(std::clamp<long>(left, 1, a.timeout_s)));
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (at.kind == Attempt::Kind::kAnswered) {
      print_answer(a, p, at, seconds, attempts);
      if (a.expect_injected && at.text.rfind("patched: /dev/shm", 0) != 0) {
        std::cerr << p.where() << " -> expected an injected /dev/shm, got: " << at.text << "\n";
        return kExitFindings;
      }
      return kExitOk;
    }
    if (at.text != said) {  // each new outcome once, for the check Job's log
      std::cerr << std::fixed << std::setprecision(1) << seconds << "s: " << at.text << "\n";
      said = at.text;
    }
    if (Clock::now() + kPause >= deadline) {
      std::cerr << "shmguard review: " << p.where() << ": no answer from shmguard through the API server within "
                << a.wait_s << "s (" << attempts << " dry runs in namespace " << a.namespace_name << "); the last: "
                << at.text << ".\n" << hint(a, at) << "\n";
      return kExitFindings;
    }
    std::this_thread::sleep_for(kPause);
  }
}

}  // namespace

int run_review_through_api_server(const ReviewArgs& a) {
  // The API server may close a connection as it answers (a 403, a restart): the TLS close_notify
  // written into it then must be an error, not a SIGPIPE that kills the check.
  ::signal(SIGPIPE, SIG_IGN);
  auto api = locate(a);
  if (!api) return review_fail(api.error());
  auto pods = pods_to_review(a);
  if (!pods) return review_fail(pods.error());
  const auto deadline = Clock::now() + std::chrono::seconds(a.wait_s);
  int code = kExitOk;
  for (const auto& p : *pods) code = std::max(code, review_one(*api, a, p, deadline));
  return code;
}

}  // namespace shmguard::cli
