// `shmguard review` (see review_command.h).
#include "cli/review_command.h"

#include "cli/shared.h"
#include "cli/exit_codes.h"
#include "files/walk.h"
#include "cli/review_parts.h"

#include <memory>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/text.h"
#include "manifests/offline.h"
#include "manifests/templates.h"
#include "probe/webhook.h"

namespace shmguard::cli {
namespace {

using nlohmann::json;

// A small DataLoader pod, for `helm test` and smoke tests: what the webhook must inject.
constexpr const char* kTestPod = R"(apiVersion: v1
kind: Pod
metadata:
  generateName: shmguard-review-
  annotations:
    shmguard.io/batch-size: "32"
    shmguard.io/num-workers: "4"
    shmguard.io/sample-size: 1Mi
spec:
  securityContext:  # admitted where Pod Security enforces "restricted", too
    runAsNonRoot: true
    runAsUser: 1000
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: train
    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
    securityContext:
      allowPrivilegeEscalation: false
      capabilities:
        drop: [ALL]
)";

// The pod templates to send: the built-in test pod and those of the files.
Status collect(const ReviewArgs& a, manifests::OfflineRunner& runner) {
  if (a.test_pod) {
    std::istringstream pod(kTestPod);
    if (auto done = runner.process("<test-pod>", pod); !done) return done;
  }
  for (const auto& f : a.files) {
    std::ifstream file;
    if (f != "-") {
      file.open(f, std::ios::binary);
      if (!file) return Failure{f + ": cannot open: " + std::strerror(errno)};
    }
    if (auto done = runner.process(f == "-" ? "<stdin>" : f, f == "-" ? std::cin : file); !done) return done;
  }
  return Ok{};
}

}  // namespace

std::string PodToReview::where() const {
  return file + ":" + std::to_string(line) + " " + (kind.empty() ? "?" : kind) + "/" + (name.empty() ? "?" : name) +
         " " + path;
}

json PodToReview::where_json() const {
  return {{"file", file}, {"line", line}, {"kind", kind}, {"name", name}, {"template", path}};
}

int review_fail(const std::string& msg) {
  std::cerr << "shmguard review: " << msg << "\n";
  return kExitBadInput;
}

Result<std::vector<PodToReview>> pods_to_review(const ReviewArgs& a) {
  config::Config cfg;  // only discovery is used; the webhook decides
  manifests::OfflineRunner runner(cfg, manifests::OutputFormat::kNone, std::cout);
  runner.keep_objects();
  if (auto c = collect(a, runner); !c) return c.failure_part();
  if (runner.reports().empty()) return Failure{"no pod templates found"};
  std::vector<PodToReview> pods;
  for (const auto& r : runner.reports()) {
    pods.push_back({r.file, r.ref.kind, r.ref.name, r.ref.display_path(), r.line, r.ref.namespace_name,
                    manifests::operator_pod(r.object, r.ref)});
  }
  return pods;
}

int run_review(const ReviewArgs& a) {
  ::signal(SIGPIPE, SIG_IGN);  // a webhook that closes as it answers is an error, not a SIGPIPE
  auto parsed = probe::parse_url(a.server, "/mutate");
  if (!parsed) return review_fail(parsed.error());
  const probe::Url& url = *parsed;
  const std::string name = a.server_name.empty() ? url.host : a.server_name;
  auto pods = pods_to_review(a);
  if (!pods) return review_fail(pods.error());

  probe::WebhookClient cli({.server = a.server, .url = url, .server_name = name, .ca_file = a.ca_file,
                            .timeout_s = a.timeout_s});

  int code = kExitOk;
  json all = json::array();
  for (const auto& p : *pods) {
    const std::string where = p.where();
    auto answer = cli.ask(p.pod, p.namespace_name.empty() ? "default" : p.namespace_name);
    if (!answer) return review_fail(answer.error());
    if (answer->status != 200) {
      std::cerr << where << " -> HTTP " << answer->status << ": " << answer->body << "\n";
      code = kExitFindings;
      continue;
    }
    const probe::WebhookAnswer& r = *answer;
    if (!r.allowed) code = kExitFindings;
    if (a.expect_injected && r.decision.rfind("patched: /dev/shm", 0) != 0) {
      std::cerr << where << " -> expected an injected /dev/shm, got: " << r.decision << "\n";
      code = kExitFindings;
    }
    if (a.output == "json") {
      json record = p.where_json();
      record.update({{"allowed", r.allowed}, {"decision", r.decision}, {"warnings", r.warnings}, {"patch", r.patch}});
      all.push_back(std::move(record));
      continue;
    }
    std::cout << where << " -> " << r.decision << "\n";
    for (const auto& w : r.warnings) std::cout << "    warning: " << w.get<std::string>() << "\n";
    if (r.patch.is_array()) std::cout << "    patch: " << r.patch.dump() << "\n";
  }
  if (a.output == "json") std::cout << all.dump(2) << "\n";
  return code;
}

namespace {

// The flags' checks, then the review itself.
int review(ReviewArgs a, const std::string& wait_text) {
  if (a.files.empty() && !a.test_pod) return fail("review: give -f FILE or --test-pod");
  auto wait = parse_duration_s(wait_text);
  if (!wait) return fail("review: --wait: \"" + printable(wait_text) + "\" is not a duration (90s, 2m, 1h30m)");
  a.wait_s = *wait;
  if (!a.through_api_server) {
    if (a.wait_s != 0) return fail("review: --wait needs --through-api-server");
    if (a.server.empty() || a.ca_file.empty()) return fail("review: give --server and --ca (or --through-api-server)");
  }
  auto found = files::expand_inputs(a.files);
  if (!found) return fail(found.error());
  a.files = std::move(*found);
  return a.through_api_server ? run_review_through_api_server(a) : run_review(a);
}

}  // namespace

void add_review(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<ReviewArgs>();
  auto wait = std::make_shared<std::string>("0s");
  auto* c = app.add_subcommand("review", "Ask a running webhook (or the API server) what it does with each pod template of some manifests");
  set_usage(*c, {.input = "manifests (-f FILE|DIR|-, as check reads them) or --test-pod; the webhook's URL and the CA "
                         "its certificate must chain to; with --through-api-server the API server (in a pod: its "
                         "service account, as client-go finds it)",
                .output = "-o text (default): per pod template the decision, the warnings and the decoded patch; "
                          "-o json: the same as one record each",
                .exits = {{kExitOk, "every answer admitted the pod (and injected /dev/shm, with --expect-injected)"},
                          {kExitFindings, "an answer refused the pod, was not HTTP 200, or did not inject with "
                                          "--expect-injected; or --wait ran out with no answer from shmguard"},
                          {kExitBadInput, "bad input or flags, or the webhook cannot be reached (the message says "
                                          "where to look)"}}});
  c->add_option("--server", a->server,
      "webhook URL, https://host:port[/path] (path default /mutate); with --through-api-server the API "
      "server's URL (default: in-cluster)");
  c->add_option("--ca", a->ca_file,
      "PEM CA the serving certificate must chain to (with --through-api-server default: in-cluster)")
      ->check(CLI::ExistingFile);
  c->add_option("--server-name", a->server_name, "name the certificate must be valid for (default: the URL's host)");
  auto* files = c->add_option("-f,--filename", a->files, "file, directory or - for stdin (repeatable)");
  c->add_flag("--test-pod", a->test_pod, "review a built-in PyTorch training pod (what `helm test` does)")
      ->excludes(files);
  c->add_flag("--expect-injected", a->expect_injected, "exit 1 unless every answer injects /dev/shm");
  c->add_option("-o,--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  c->add_option("--timeout", a->timeout_s, "seconds to connect, send and read")->capture_default_str();
  c->add_flag("--through-api-server", a->through_api_server,
      "create each pod through the API server as a server-side dry run (never stored): the answer "
      "comes the whole way API server -> Service -> webhook pod (the chart's install check)");
  c->add_option("--token-file", a->token_file,
      "bearer token for the API server (default: the pod's service account token)");
  c->add_option("--namespace", a->namespace_name, "namespace of the dry-run pods (one the webhook selects)")
      ->capture_default_str();
  c->add_option("--wait", *wait,
      "with --through-api-server: ask again until shmguard answers, for this long (e.g. 2m)")
      ->capture_default_str();
  c->add_option("--webhook-service", a->webhook_service,
      "NAMESPACE/NAME of the webhook's Service, named in the message when no answer comes");
  c->callback([a, wait, &out] { out.code = review(*a, *wait); });
}

}  // namespace shmguard::cli
