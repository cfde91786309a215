// Asking through the API server (see api_server.h).
#include "probe/api_server.h"

#include <httplib.h>

#include <cstdlib>

#include "kube/access.h"
#include "probe/webhook.h"

namespace shmguard::probe {
namespace {

using nlohmann::json;

}  // namespace

Result<ApiServer> locate_api_server(const std::string& given_server, const std::string& ca_file,
                                    const std::string& token_file) {
  ApiServer s;
  std::string server = given_server;
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
  s.ca_file = ca_file.empty() ? std::string(kube::kServiceAccountDir) + "ca.crt" : ca_file;
  s.token_file = token_file.empty() ? std::string(kube::kServiceAccountDir) + "token" : token_file;
  return s;
}

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

bool shmguard_answered(const std::string& decision, const std::vector<std::string>& warnings) {
  if (!decision.empty()) return true;
  for (const auto& w : warnings)
    if (w.rfind("shmguard would inject", 0) == 0) return true;  // audit mode: a warning, no patch
  return false;
}

Attempt classify(int status, const std::string& body_text, const std::vector<std::string>& warning_headers) {
  Attempt at;
  for (const auto& h : warning_headers) at.warnings.push_back(warning_text(h));
  const json body = json::parse(body_text, nullptr, false);
  if (status != 200 && status != 201) {
    at.kind = Attempt::Kind::kRefused;
    const std::string msg = body.is_object() ? body.value("message", std::string()) : std::string();
    at.text = "the API server answered HTTP " + std::to_string(status) + ": " + (msg.empty() ? body_text : msg);
    return at;
  }
  at.text = injected_decision(body);
  at.kind = shmguard_answered(at.text, at.warnings) ? Attempt::Kind::kAnswered : Attempt::Kind::kUnchanged;
  if (at.kind == Attempt::Kind::kAnswered && at.text.empty()) at.text = "allowed unchanged";
  if (at.kind == Attempt::Kind::kUnchanged) at.text = "admitted without shmguard's answer (no /dev/shm volume, no shmguard warning)";
  return at;
}

Attempt ask_through_api(const ApiServer& api, const std::string& namespace_name, const json& pod, int timeout_s) {
  auto token = kube::read_token(api.token_file, "the service account token");  // read on every attempt: it rotates
  if (!token) return {Attempt::Kind::kRefused, token.error(), {}};
  httplib::SSLClient cli(api.url.host, api.url.port);
  cli.set_ca_cert_path(api.ca_file);
  cli.enable_server_certificate_verification(true);
  cli.set_connection_timeout(timeout_s, 0);
  cli.set_read_timeout(timeout_s, 0);
  cli.set_write_timeout(timeout_s, 0);
  cli.set_bearer_token_auth(*token);
  const std::string path = api.url.path + "/api/v1/namespaces/" + namespace_name +
                           "/pods?dryRun=All&fieldManager=shmguard-review";
  auto res = cli.Post(path, pod.dump(), "application/json");
  if (!res) {
    Attempt at;
    at.text = "cannot reach the API server at " + api.url.host + ":" + std::to_string(api.url.port) + ": " +
              httplib::to_string(res.error());
    if (long v = cli.get_openssl_verify_result(); v != 0) at.text += std::string(": ") + X509_verify_cert_error_string(v);
    return at;
  }
  std::vector<std::string> warnings;
  for (std::size_t i = 0; i < res->get_header_value_count("Warning"); ++i)
    warnings.push_back(res->get_header_value("Warning", i));
  return classify(res->status, res->body, warnings);
}

}  // namespace shmguard::probe
