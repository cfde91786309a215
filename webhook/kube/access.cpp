// Kubeconfig and the API client (see access.h).
#include "kube/access.h"

#include "base/text.h"
#include "kube/client_internal.h"

#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace shmguard::kube {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A file the kubeconfig (or the pod) names, the failure saying what it is for.
Result<std::string> read_file(const std::string& path, const std::string& what) {
  auto text = shmguard::read_file(path);
  if (!text) return Failure{what + ": " + text.error()};
  return text;
}

}  // namespace

Result<std::string> read_token(const std::string& path, const std::string& what) {
  auto text = read_file(path, what);
  if (!text) return text.failure_part();
  const std::string_view token = trim_end(*text);
  if (token.empty()) return Failure{what + ": " + path + ": the token is empty"};
  return std::string(token);
}

namespace {

Result<std::string> base64(const std::string& text, const std::string& what) {
  std::string in;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) in += c;
  std::string out(in.size() / 4 * 3 + 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0 || in.size() % 4 != 0) return Failure{what + " is not base64"};
  std::size_t len = static_cast<std::size_t>(n);
  if (!in.empty() && in.back() == '=') --len;
  if (in.size() > 1 && in[in.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

// https://host[:port][/path]
Status set_server(const std::string& url, Access& a) {
  const std::string scheme = "https://";
  if (url.rfind(scheme, 0) != 0) return Failure{"server " + url + " is not an https:// URL"};
  std::string rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  if (slash != std::string::npos) {
    a.base_path = rest.substr(slash);
    while (!a.base_path.empty() && a.base_path.back() == '/') a.base_path.pop_back();
    rest = rest.substr(0, slash);
  }
  std::string port;
  if (!rest.empty() && rest[0] == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) return Failure{"server " + url + ": unclosed ["};
    a.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    a.host = rest.substr(0, colon);
    if (colon != std::string::npos) port = rest.substr(colon + 1);
  }
  if (!port.empty()) {
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (*end || p <= 0 || p > 65535) return Failure{"server " + url + ": bad port"};
    a.port = static_cast<int>(p);
  }
  if (a.host.empty()) return Failure{"server " + url + " has no host"};
  return Ok{};
}

// "<field>-data" (base64) or "<field>" (a file, relative to the kubeconfig's directory).
Result<std::string> pem(const YAML::Node& n, const std::string& field, const fs::path& dir, const std::string& where) {
  if (n[field + "-data"]) return base64(n[field + "-data"].as<std::string>(), where + ": " + field + "-data");
  if (n[field]) {
    fs::path p = n[field].as<std::string>();
    if (p.is_relative()) p = dir / p;
    return read_file(p.string(), where + ": " + field);
  }
  return std::string();
}

// Runs an exec credential plugin (client.authentication.k8s.io ExecCredential) and takes its token
// or client certificate.
Status run_exec(const YAML::Node& exec, Access& a, const std::string& where) {
  const std::string command = exec["command"] ? exec["command"].as<std::string>() : "";
  if (command.empty()) return Failure{where + ": exec has no command"};
  std::vector<std::string> argv{command};
  if (exec["args"])
    for (const auto& x : exec["args"]) argv.push_back(x.as<std::string>());
  const std::string api = exec["apiVersion"] ? exec["apiVersion"].as<std::string>() : "client.authentication.k8s.io/v1";
  int pipefd[2];
  if (pipe(pipefd) != 0) return Failure{where + ": exec: pipe failed"};
  const pid_t pid = fork();
  if (pid < 0) return Failure{where + ": exec: fork failed"};
  if (pid == 0) {
    dup2(pipefd[1], STDOUT_FILENO);
    close(pipefd[0]);
    close(pipefd[1]);
    if (exec["env"])
      for (const auto& e : exec["env"]) setenv(e["name"].as<std::string>().c_str(), e["value"].as<std::string>().c_str(), 1);
    const std::string info = json{{"apiVersion", api}, {"kind", "ExecCredential"}, {"spec", {{"interactive", false}}}}.dump();
    setenv("KUBERNETES_EXEC_INFO", info.c_str(), 1);
    std::vector<char*> args;
    for (auto& s : argv) args.push_back(s.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(pipefd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Failure{where + ": exec credential plugin " + command + " failed (exit status " +
                   std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) + ")"};
  const json cred = json::parse(out, nullptr, false);
  const json st = cred.is_object() ? cred.value("status", json::object()) : json();
  if (!st.is_object()) return Failure{where + ": exec credential plugin " + command + " printed no ExecCredential"};
  a.token = st.value("token", std::string());
  a.client_cert_pem = st.value("clientCertificateData", std::string());
  a.client_key_pem = st.value("clientKeyData", std::string());
  if (a.token.empty() && a.client_cert_pem.empty())
    return Failure{where + ": exec credential plugin " + command + " gave neither a token nor a client certificate"};
  return Ok{};
}

YAML::Node named(const YAML::Node& list, const std::string& name, const char* inner) {
  if (list && list.IsSequence())
    for (const auto& e : list)
      if (e["name"] && e["name"].as<std::string>() == name) return e[inner];
  return YAML::Node(YAML::NodeType::Undefined);  // a default Node is a defined null
}

Result<Access> from_kubeconfig(const fs::path& file, const std::string& context_flag) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    return Failure{file.string() + ":" + std::to_string(e.mark.line + 1) + ": invalid kubeconfig: " + e.msg};
  }
  const std::string context = !context_flag.empty() ? context_flag
                              : root["current-context"] ? root["current-context"].as<std::string>() : "";
  if (context.empty()) return Failure{file.string() + ": no current-context (give --context)"};
  Access a;
  a.where = "context " + context + " in " + file.string();
  const YAML::Node ctx = named(root["contexts"], context, "context");
  if (!ctx) return Failure{file.string() + ": no context named " + context};
  const std::string cluster_name = ctx["cluster"] ? ctx["cluster"].as<std::string>() : "";
  const std::string user_name = ctx["user"] ? ctx["user"].as<std::string>() : "";
  const YAML::Node cluster = named(root["clusters"], cluster_name, "cluster");
  if (!cluster || !cluster["server"]) return Failure{a.where + ": cluster " + cluster_name + " has no server"};
  if (auto s = set_server(cluster["server"].as<std::string>(), a); !s) return Failure{a.where + ": " + s.error()};
  const fs::path dir = file.parent_path();
  auto ca = pem(cluster, "certificate-authority", dir, a.where);
  if (!ca) return ca.failure_part();
  a.ca_pem = *ca;
  a.insecure = cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>();
  const YAML::Node user = named(root["users"], user_name, "user");
  if (!user) return a;  // anonymous
  auto cert = pem(user, "client-certificate", dir, a.where);
  if (!cert) return cert.failure_part();
  auto key = pem(user, "client-key", dir, a.where);
  if (!key) return key.failure_part();
  a.client_cert_pem = *cert;
  a.client_key_pem = *key;
  if (user["token"]) a.token = user["token"].as<std::string>();
  if (user["tokenFile"]) {
    auto t = read_token(user["tokenFile"].as<std::string>(), a.where + ": tokenFile");
    if (!t) return t.failure_part();
    a.token = std::move(*t);
  }
  if (user["exec"])
    if (auto s = run_exec(user["exec"], a, a.where); !s) return s.failure_part();
  return a;
}

Result<Access> in_cluster() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  Access a;
  a.where = "the pod's service account";
  a.host = host;
  a.port = std::atoi(port);
  auto ca = read_file(std::string(kServiceAccountDir) + "ca.crt", "service account CA");
  if (!ca) return ca.failure_part();
  auto token = read_token(std::string(kServiceAccountDir) + "token", "service account token");
  if (!token) return token.failure_part();
  a.ca_pem = *ca;
  a.token = std::move(*token);
  return a;
}

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

X509_STORE* ca_store(const std::string& pem_text) {
  X509_STORE* store = X509_STORE_new();
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem_text.data(), static_cast<int>(pem_text.size())), BIO_free);
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, c);
    X509_free(c);
  }
  return store;
}

// The error the verification of this thread's last handshake gave (httplib reports only its own
// check's, which verify_against turns off).
thread_local int t_verify_error = X509_V_OK;

int record_verify_error(int ok, X509_STORE_CTX* ctx) {
  if (!ok) t_verify_error = X509_STORE_CTX_get_error(ctx);
  return ok;
}

// The server's certificate must chain to `ca_pem` and nothing else, as kubectl trusts a
// kubeconfig's CA alone, and name `host` (an IP SAN for an address). OpenSSL checks both during the
// handshake. httplib's own check would add the system's CA bundle to the store, and parse those
// ~140 certificates again for every connection: 2/3 of a 200-kubelet cycle's CPU, measured.
void verify_against(httplib::SSLClient& cli, const std::string& ca_pem, const std::string& host) {
  cli.enable_server_certificate_verification(false);
  SSL_CTX* ctx = cli.ssl_context();
  SSL_CTX_set_cert_store(ctx, ca_store(ca_pem));
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, record_verify_error);
}

}  // namespace

Result<Access> load_access(const std::string& kubeconfig, const std::string& context) {
  if (!kubeconfig.empty()) return from_kubeconfig(kubeconfig, context);
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    std::string first = env;
    first = first.substr(0, first.find(':'));  // the first file of the list
    return from_kubeconfig(first, context);
  }
  if (const char* home = std::getenv("HOME"); home && fs::exists(fs::path(home) / ".kube" / "config"))
    return from_kubeconfig(fs::path(home) / ".kube" / "config", context);
  if (std::getenv("KUBERNETES_SERVICE_HOST") && std::getenv("KUBERNETES_SERVICE_PORT")) return in_cluster();
  return Failure{"no kubeconfig: give --kubeconfig, set KUBECONFIG, or create ~/.kube/config"};
}

Result<std::unique_ptr<httplib::SSLClient>> new_client(const Access& a, long timeout_ms) {
  X509Ptr cert(nullptr, X509_free);
  KeyPtr key(nullptr, EVP_PKEY_free);
  if (!a.client_cert_pem.empty()) {
    std::unique_ptr<BIO, decltype(&BIO_free)> cb(BIO_new_mem_buf(a.client_cert_pem.data(), static_cast<int>(a.client_cert_pem.size())), BIO_free);
    std::unique_ptr<BIO, decltype(&BIO_free)> kb(BIO_new_mem_buf(a.client_key_pem.data(), static_cast<int>(a.client_key_pem.size())), BIO_free);
    cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
    key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
    if (!cert || !key) return Failure{a.where + ": the client certificate or key is not PEM"};
  }
  // The SSL_CTX takes its own references to the certificate and key.
  auto cli = std::make_unique<httplib::SSLClient>(a.host, a.port, cert.get(), key.get());
  if (a.insecure) cli->enable_server_certificate_verification(false);
  else if (!a.ca_pem.empty()) verify_against(*cli, a.ca_pem, a.host);
  t_verify_error = X509_V_OK;
  const time_t sec = timeout_ms / 1000;
  const time_t usec = (timeout_ms % 1000) * 1000;
  cli->set_connection_timeout(sec, usec);
  cli->set_read_timeout(sec, usec);
  cli->set_write_timeout(sec, usec);
  return cli;
}

httplib::Headers request_headers(const Access& a) {
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!a.token.empty()) headers.emplace("Authorization", "Bearer " + a.token);
  return headers;
}

std::string transport_failure(const Access& a, httplib::SSLClient& cli, httplib::Error e) {
  std::string why = "cannot reach " + a.host + ":" + std::to_string(a.port) + " (" + a.where + "): " + httplib::to_string(e);
  if (long v = cli.get_openssl_verify_result(); v != 0) why += std::string(": ") + X509_verify_cert_error_string(v);
  else if (t_verify_error != X509_V_OK) why += std::string(": ") + X509_verify_cert_error_string(t_verify_error);
  return why;
}

namespace {

Result<Response> request(const Access& a, const std::string& path, const json* post_body, long timeout_ms, bool raw) {
  auto made = new_client(a, timeout_ms);
  if (!made) return made.failure_part();
  httplib::SSLClient& cli = **made;
  const httplib::Headers headers = request_headers(a);
  auto res = post_body ? cli.Post((a.base_path + path).c_str(), headers, post_body->dump(), "application/json")
                       : cli.Get((a.base_path + path).c_str(), headers);
  if (!res) return Failure{transport_failure(a, cli, res.error())};
  Response r;
  r.status = res->status;
  r.text = std::move(res->body);  // a list page or a summary: one copy held, not two
  if (!raw || r.status != 200) {
    r.body = json::parse(r.text, nullptr, false);
    if (r.body.is_discarded()) r.body = nullptr;
  }
  return r;
}

}  // namespace

Result<Response> get(const Access& a, const std::string& path, int timeout_s, bool raw) {
  return request(a, path, nullptr, timeout_s * 1000L, raw);
}

Result<Response> get_within(const Access& a, const std::string& path, long timeout_ms) {
  return request(a, path, nullptr, timeout_ms, false);
}

Result<Response> post(const Access& a, const std::string& path, const json& body, int timeout_s) {
  return request(a, path, &body, timeout_s * 1000L, false);
}

Access at_kubelet(const Access& a, const std::string& host, int port, const std::string& ca_pem, bool insecure) {
  Access k = a;
  k.where = "the kubelet at " + host + ":" + std::to_string(port);
  k.host = host;
  k.port = port;
  k.base_path.clear();
  k.ca_pem = ca_pem;
  k.insecure = insecure;
  return k;
}

std::string error_message(const Response& r) {
  if (r.body.is_object() && r.body.contains("message") && r.body["message"].is_string())
    return r.body["message"].get<std::string>();
  const std::string_view t = trim_end(std::string_view(r.text).substr(0, 300));
  return t.empty() ? "HTTP " + std::to_string(r.status) : std::string(t);
}

}  // namespace shmguard::kube
