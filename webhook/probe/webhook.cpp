// Asking a webhook directly (see webhook.h).
#include "probe/webhook.h"

#include <httplib.h>

#include <sstream>
#include <utility>

#include "admission/review.h"
#include "inject/inject.h"

namespace shmguard::probe {
namespace {

using nlohmann::json;

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

// Why no answer came, with the hint that fits the error.
std::string unreachable(const WebhookTarget& t, httplib::Error e, long verify_result) {
  const std::string& name = t.server_name;
  std::ostringstream why;
  why << "cannot reach " << t.server << " (certificate verified for " << name << "): " << httplib::to_string(e);
  if (verify_result != 0) why << ": " << X509_verify_cert_error_string(verify_result);
  else if (e == httplib::Error::SSLServerVerification)
    why << ": the serving certificate is not valid for " << name << " (use --server-name)";
  else if (e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout)
    why << ": " << no_endpoint_hint(name);
  return why.str();
}

// Connect to the URL's host but verify the certificate (and send SNI) for the server name: what
// the API server does for a Service reference, and what a port-forward to localhost needs.
void configure(httplib::SSLClient& cli, const WebhookTarget& t) {
  if (t.server_name != t.url.host) cli.set_hostname_addr_map({{t.server_name, t.url.host}});
  cli.set_ca_cert_path(t.ca_file);
  cli.enable_server_certificate_verification(true);
  cli.set_connection_timeout(t.timeout_s, 0);
  cli.set_read_timeout(t.timeout_s, 0);
  cli.set_write_timeout(t.timeout_s, 0);
  cli.set_keep_alive(true);
  cli.set_tcp_nodelay(true);
}

}  // namespace

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

std::string injected_decision(const json& admitted_pod) {
  const json* spec = admitted_pod.is_object() && admitted_pod.contains("spec") ? &admitted_pod["spec"] : nullptr;
  const json vols = spec && spec->is_object() ? spec->value("volumes", json::array()) : json::array();
  for (const auto& v : vols.is_array() ? vols : json::array())
    if (v.is_object() && v.value("name", "") == inject::kVolumeName && v.contains("emptyDir") &&
        v["emptyDir"].is_object())
      return "patched: /dev/shm " + v["emptyDir"].value("sizeLimit", std::string("?"));
  return "";
}

std::string decision_of(const json& pod, bool allowed, const json& patch) {
  if (!allowed) return "denied";
  if (!patch.is_array()) return "allowed unchanged";
  const std::string injected = injected_decision(pod.patch(patch));
  return injected.empty() ? "patched" : injected;
}

WebhookAnswer read_answer(const json& pod, int status, std::string body_text) {
  WebhookAnswer a;
  a.status = status;
  a.body = std::move(body_text);
  if (status != 200) return a;
  json body = json::parse(a.body, nullptr, false);
  const json resp = body.is_object() ? body.value("response", json::object()) : json::object();
  a.patch = resp.contains("patch") ? json::parse(admission::base64_decode(resp["patch"].get<std::string>()), nullptr, false)
                                   : json(nullptr);
  a.allowed = resp.value("allowed", false);
  a.warnings = resp.value("warnings", json::array());
  a.decision = decision_of(pod, a.allowed, a.patch);
  return a;
}

struct WebhookClient::Impl {
  explicit Impl(WebhookTarget t) : target(std::move(t)), cli(target.server_name, target.url.port) {
    configure(cli, target);
  }
  WebhookTarget target;
  httplib::SSLClient cli;
  std::size_t sent = 0;
};

WebhookClient::WebhookClient(WebhookTarget target) : impl_(std::make_unique<Impl>(std::move(target))) {}
WebhookClient::~WebhookClient() = default;

Result<WebhookAnswer> WebhookClient::ask(const json& pod, const std::string& ns) {
  auto res = impl_->cli.Post(impl_->target.url.path, review_for(pod, ns, ++impl_->sent).dump(), "application/json");
  if (!res) return Failure{unreachable(impl_->target, res.error(), impl_->cli.get_openssl_verify_result())};
  return read_answer(pod, res->status, std::move(res->body));
}

}  // namespace shmguard::probe
