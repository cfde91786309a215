// `shmguard review --through-api-server` (see review_command.h): each pod is created through the API server
// as a server-side dry run (probe/api_server.h asks), so the answer has travelled the path every
// real pod takes: API server -> the webhook's Service -> a webhook pod. With --wait it
// asks again until shmguard answers: the chart's post-install/post-upgrade check, which makes
// `helm install --wait` return only once the next pod will be injected.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/exit_codes.h"
#include "cli/review_command.h"
#include "cli/review_parts.h"
#include "probe/api_server.h"

namespace shmguard::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using probe::Attempt;

constexpr auto kPause = std::chrono::milliseconds(500);  // between attempts

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
int review_one(const probe::ApiServer& api, const ReviewArgs& a, const PodToReview& p, Clock::time_point deadline) {
  json pod = p.pod;
  pod["metadata"]["namespace"] = a.namespace_name;
  const auto t0 = Clock::now();
  std::string said;
  for (int attempts = 1;; ++attempts) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count();
    const Attempt at = probe::ask_through_api(api, a.namespace_name, pod, static_cast<int>(std::clamp<long>(left, 1, a.timeout_s)));
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
  auto api = probe::locate_api_server(a.server, a.ca_file, a.token_file);
  if (!api) return review_fail(api.error());
  auto pods = pods_to_review(a);
  if (!pods) return review_fail(pods.error());
  const auto deadline = Clock::now() + std::chrono::seconds(a.wait_s);
  int code = kExitOk;
  for (const auto& p : *pods) code = std::max(code, review_one(*api, a, p, deadline));
  return code;
}

}  // namespace shmguard::cli
