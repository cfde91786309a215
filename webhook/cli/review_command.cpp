// `shmguard review` (see review_command.h).
#include "cli/review_command.h"

#include "cli/shared.h"
#include "cli/exit_codes.h"
#include "files/walk.h"
#include "cli/review_parts.h"

#include <httplib.h>
#include <memory>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "admission/review.h"
#include "base/text.h"
#include "inject/inject.h"
#include "manifests/offline.h"
#include "manifests/templates.h"

namespace shmguard::cli {
namespace {

using nlohmann::json;

// The pod a controller would create from a template, as the API server sends it for admission.

json review_for(const json& pod, const std::string& ns, std::size_t n) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "shmguard-review-" + std::to_string(n)},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"requestKind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"namespace", ns},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "shmguard-review"}}},
            {"object", pod},
            {"oldObject", nullptr},
            {"dryRun", true},
            {"options", {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "CreateOptions"}}}}}};
}

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

// What a refused connection to a Service usually means, and where to look. `name` is the name
// the certificate is checked for: for the chart's webhook, <service>.<namespace>.svc.
std::string no_endpoint_hint(const std::string& name) {
  std::string where = "`kubectl get endpoints` lists the webhook's ready pods";
  if (auto svc = name.find(".svc"); svc != std::string::npos && name.find('.') < svc) {
    const auto dot = name.find('.');
    where = "`kubectl -n " + name.substr(dot + 1, svc - dot - 1) + " get endpoints " + name.substr(0, dot) +
            "` lists its ready pods";
  }
  return "nothing answers there. If this is the webhook's Service, it has no ready pod: " + where +
         ", `kubectl get pods` shows why (image not pulled, crash-looping on its config). "
         "Until one is ready, failurePolicy Ignore admits every pod without /dev/shm";
}

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

// Why no answer came, with the hint that fits the error.
std::string unreachable(const ReviewArgs& a, const std::string& name, httplib::Error e,
                        long verify_result) {
  std::ostringstream why;
  why << "cannot reach " << a.server << " (certificate verified for " << name << "): " << httplib::to_string(e);
  if (verify_result != 0) why << ": " << X509_verify_cert_error_string(verify_result);
  else if (e == httplib::Error::SSLServerVerification)
    why << ": the serving certificate is not valid for " << name << " (use --server-name)";
  else if (e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout)
    why << ": " << no_endpoint_hint(name);
  return why.str();
}

// "patched: /dev/shm 8Gi", "patched", "allowed unchanged" or "denied", as the API server would store it.
std::string decision_of(const json& pod, bool allowed, const json& patch) {
  if (!allowed) return "denied";
  if (!patch.is_array()) return "allowed unchanged";
  const std::string injected = injected_decision(pod.patch(patch));
  return injected.empty() ? "patched" : injected;
}

// Connect to the URL's host but verify the certificate (and send SNI) for `name`: what the API
// server does for a Service reference, and what a port-forward to localhost needs.
void configure(httplib::SSLClient& cli, const ReviewArgs& a, const Url& url, const std::string& name) {
  if (name != url.host) cli.set_hostname_addr_map({{name, url.host}});
  cli.set_ca_cert_path(a.ca_file);
  cli.enable_server_certificate_verification(true);
  cli.set_connection_timeout(a.timeout_s, 0);
  cli.set_read_timeout(a.timeout_s, 0);
  cli.set_write_timeout(a.timeout_s, 0);
  cli.set_keep_alive(true);
  cli.set_tcp_nodelay(true);
}

}  // namespace

Result<Url> parse_url(const std::string& s, std::string_view default_path, std::string_view flag) {
  Url u;
  u.path = std::string(default_path);
  const std::string scheme = "https://";
  if (s.compare(0, scheme.size(), scheme) != 0) {
    return Failure{std::string(flag) + " must be an https:// URL, got \"" + s + "\""};
  }
  std::string rest = s.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    if (slash + 1 < rest.size()) u.path = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  std::string port;
  if (!rest.empty() && rest.front() == '[') {  // [::1]:8443
    auto close = rest.find(']');
    if (close == std::string::npos) {
      return Failure{std::string(flag) + ": unterminated IPv6 address"};
    }
    u.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    u.host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  } else {
    u.host = rest;
  }
  if (!port.empty()) {
    if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) > 65535) {
      return Failure{std::string(flag) + ": bad port \"" + port + "\""};
    }
    u.port = std::stoi(port);
  }
  if (u.host.empty()) {
    return Failure{std::string(flag) + ": no host in \"" + s + "\""};
  }
  return u;
}

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

std::string injected_decision(const json& admitted_pod) {
  const json* spec = admitted_pod.is_object() && admitted_pod.contains("spec") ? &admitted_pod["spec"] : nullptr;
  const json vols = spec && spec->is_object() ? spec->value("volumes", json::array()) : json::array();
  for (const auto& v : vols.is_array() ? vols : json::array())
    if (v.is_object() && v.value("name", "") == inject::kVolumeName && v.contains("emptyDir") &&
        v["emptyDir"].is_object())
      return "patched: /dev/shm " + v["emptyDir"].value("sizeLimit", std::string("?"));
  return "";
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
  auto parsed = parse_url(a.server, "/mutate");
  if (!parsed) return review_fail(parsed.error());
  const Url& url = *parsed;
  const std::string name = a.server_name.empty() ? url.host : a.server_name;
  auto pods = pods_to_review(a);
  if (!pods) return review_fail(pods.error());

  httplib::SSLClient cli(name, url.port);
  configure(cli, a, url, name);

  int code = kExitOk;
  json all = json::array();
  std::size_t n = 0;
  for (const auto& p : *pods) {
    const json& pod = p.pod;
    const std::string where = p.where();
    auto res = cli.Post(url.path, review_for(pod, p.namespace_name.empty() ? "default" : p.namespace_name, ++n).dump(),
                        "application/json");
    if (!res) return review_fail(unreachable(a, name, res.error(), cli.get_openssl_verify_result()));
    if (res->status != 200) {
      std::cerr << where << " -> HTTP " << res->status << ": " << res->body << "\n";
      code = kExitFindings;
      continue;
    }
    json body = json::parse(res->body, nullptr, false);
    const json resp = body.is_object() ? body.value("response", json::object()) : json::object();
    json patch = resp.contains("patch") ? json::parse(admission::base64_decode(resp["patch"].get<std::string>()), nullptr, false)
                                        : json(nullptr);
    const bool allowed = resp.value("allowed", false);
    const json warnings = resp.value("warnings", json::array());
    const std::string decision = decision_of(pod, allowed, patch);
    if (!allowed) code = kExitFindings;
    if (a.expect_injected && decision.rfind("patched: /dev/shm", 0) != 0) {
      std::cerr << where << " -> expected an injected /dev/shm, got: " << decision << "\n";
      code = kExitFindings;
    }
    if (a.output == "json") {
      json record = p.where_json();
      record.update({{"allowed", allowed}, {"decision", decision}, {"warnings", warnings}, {"patch", patch}});
      all.push_back(std::move(record));
      continue;
    }
    std::cout << where << " -> " << decision << "\n";
    for (const auto& w : warnings) std::cout << "    warning: " << w.get<std::string>() << "\n";
    if (patch.is_array()) std::cout << "    patch: " << patch.dump() << "\n";
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
