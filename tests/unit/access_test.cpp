// Reaching the API server as kubectl does (kube/access.h): kubeconfigs (contexts, server URLs,
// CA and client certificates inline or as files, tokens, tokenFile, exec plugins), the lookup
// order of load_access, the errors for bad input, and real requests against a loopback HTTPS
// server made here (the CA trusted alone, the host name checked, the token sent).
#include "kube/access.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#include "tls_test_util.h"

namespace kube = shmguard::kube;
using shmguard::test::make_ca;
using shmguard::test::make_leaf;
using shmguard::test::Pem;
using shmguard::test::ScratchDir;
using shmguard::test::write_text;

namespace {

// Sets (or unsets, with nullopt) environment variables for one test and puts them back after.
class EnvGuard {
 public:
  void set(const char* name, std::optional<std::string> value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// A kubeconfig with one cluster `c`, one user `u` and the context `t` joining them (current).
std::string kubeconfig(const std::string& server, const std::string& cluster_extra, const std::string& user) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
         "clusters:\n- name: c\n  cluster:\n    server: " + server + "\n" + cluster_extra +
         "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
         "- name: other\n  context: {cluster: c, user: nobody}\n"
         "users:\n- name: u\n  user:\n" + user;
}

kube::Access load(const ScratchDir& dir, const std::string& text, const std::string& context = "") {
  write_text(dir / "config", text);
  auto a = kube::load_access((dir / "config").string(), context);
  if (!a) ADD_FAILURE() << a.error();
  return a ? *a : kube::Access{};
}

std::string load_error(const ScratchDir& dir, const std::string& text, const std::string& context = "") {
  write_text(dir / "config", text);
  auto a = kube::load_access((dir / "config").string(), context);
  EXPECT_FALSE(a) << "loaded a bad kubeconfig";
  return a ? "" : a.error();
}

}  // namespace

TEST(Kubeconfig, ServerUrlCaAndTokenInline) {
  ScratchDir dir;
  const Pem ca = make_ca();
  const auto a = load(dir, kubeconfig("https://10.0.0.1:6443/k8s/clusters/c-1/",
                                      "    certificate-authority-data: " + shmguard::test::base64_encode(ca.cert) + "\n",
                                      "    token: abc.def\n"));
  EXPECT_EQ(a.host, "10.0.0.1");
  EXPECT_EQ(a.port, 6443);
  EXPECT_EQ(a.base_path, "/k8s/clusters/c-1");  // trailing slashes dropped: paths are appended
  EXPECT_EQ(a.ca_pem, ca.cert);
  EXPECT_FALSE(a.insecure);
  EXPECT_EQ(a.token, "abc.def");
  EXPECT_EQ(a.where, "context t in " + (dir / "config").string());
  EXPECT_TRUE(a.client_cert_pem.empty());
}

TEST(Kubeconfig, ServerForms) {
  ScratchDir dir;
  struct Case {
    std::string url, host;
    int port;
    std::string base;
  };
  for (const Case& c : {Case{"https://api.example.com", "api.example.com", 443, ""},
                        Case{"https://[::1]:8443", "::1", 8443, ""},
                        Case{"https://[fd00::2]/prefix", "fd00::2", 443, "/prefix"},
                        Case{"https://k:1/a/b", "k", 1, "/a/b"}}) {
    const auto a = load(dir, kubeconfig(c.url, "", "    token: x\n"));
    EXPECT_EQ(a.host, c.host) << c.url;
    EXPECT_EQ(a.port, c.port) << c.url;
    EXPECT_EQ(a.base_path, c.base) << c.url;
  }
}

TEST(Kubeconfig, BadServersAreNamed) {
  ScratchDir dir;
  const std::string where = "context t in " + (dir / "config").string() + ": ";
  EXPECT_EQ(load_error(dir, kubeconfig("http://10.0.0.1", "", "    token: x\n")),
            where + "server http://10.0.0.1 is not an https:// URL");
  EXPECT_EQ(load_error(dir, kubeconfig("https://10.0.0.1:99999", "", "    token: x\n")),
            where + "server https://10.0.0.1:99999: bad port");
  EXPECT_EQ(load_error(dir, kubeconfig("https://10.0.0.1:6443x", "", "    token: x\n")),
            where + "server https://10.0.0.1:6443x: bad port");
  EXPECT_EQ(load_error(dir, kubeconfig("https://[::1", "", "    token: x\n")), where + "server https://[::1: unclosed [");
  EXPECT_EQ(load_error(dir, kubeconfig("https://:443", "", "    token: x\n")), where + "server https://:443 has no host");
}

TEST(Kubeconfig, ContextsChosenByFlagOrCurrentContext) {
  ScratchDir dir;
  const std::string text = kubeconfig("https://h:1", "", "    token: mine\n");
  EXPECT_EQ(load(dir, text).token, "mine");
  const auto other = load(dir, text, "other");  // its user `nobody` does not exist: anonymous
  EXPECT_EQ(other.where, "context other in " + (dir / "config").string());
  EXPECT_TRUE(other.token.empty());
  const std::string file = (dir / "config").string();
  std::string no_current = text;
  no_current.replace(no_current.find("current-context: t\n"), 19, "");
  EXPECT_EQ(load_error(dir, no_current), file + ": no current-context (give --context)");
  std::string no_server = text;
  no_server.replace(no_server.find("    server: https://h:1\n"), 24, "    insecure-skip-tls-verify: true\n");
  EXPECT_EQ(load_error(dir, no_server), "context t in " + file + ": cluster c has no server");
}

// A --context that no context of the file has is named as such (it once read "cluster  has no
// server": a default YAML::Node is a defined null, so the lookup's miss went unseen).
TEST(Kubeconfig, AContextNoneHasIsNamed) {
  ScratchDir dir;
  EXPECT_EQ(load_error(dir, kubeconfig("https://h:1", "", "    token: x\n"), "missing"),
            (dir / "config").string() + ": no context named missing");
}

TEST(Kubeconfig, InvalidYamlNamesTheFileAndLine) {
  ScratchDir dir;
  const std::string err = load_error(dir, "apiVersion: v1\nclusters:\n- name: c\n  cluster: [unclosed\n");
  const std::string file = (dir / "config").string();
  EXPECT_EQ(err.rfind(file + ":", 0), 0u) << err;
  EXPECT_NE(err.find(": invalid kubeconfig: "), std::string::npos) << err;
  // The line yaml-cpp stopped at, 1-based (the flow sequence opens on line 4 and never closes).
  const int line = std::atoi(err.c_str() + file.size() + 1);
  EXPECT_GE(line, 4) << err;
  EXPECT_LE(line, 5) << err;
}

TEST(Kubeconfig, FilesRelativeToTheKubeconfigAndTheirErrors) {
  ScratchDir dir;
  const Pem ca = make_ca();
  const Pem client = make_leaf(ca, "alice", "");
  std::filesystem::create_directory(dir / "pki");
  write_text(dir / "pki" / "ca.crt", ca.cert);
  write_text(dir / "pki" / "alice.crt", client.cert);
  write_text(dir / "pki" / "alice.key", client.key);
  write_text(dir / "token", "tok-from-file\n");
  const auto a = load(dir, kubeconfig("https://h:1", "    certificate-authority: pki/ca.crt\n",
                                      "    client-certificate: pki/alice.crt\n    client-key: " +
                                          (dir / "pki" / "alice.key").string() + "\n    tokenFile: " +
                                          (dir / "token").string() + "\n"));
  EXPECT_EQ(a.ca_pem, ca.cert);
  EXPECT_EQ(a.client_cert_pem, client.cert);
  EXPECT_EQ(a.client_key_pem, client.key);
  EXPECT_EQ(a.token, "tok-from-file");  // the line break at its end dropped

  const std::string where = "context t in " + (dir / "config").string();
  const std::string missing = load_error(dir, kubeconfig("https://h:1", "    certificate-authority: nope.crt\n", "    token: x\n"));
  EXPECT_EQ(missing.rfind(where + ": certificate-authority: ", 0), 0u) << missing;
  EXPECT_NE(missing.find((dir / "nope.crt").string()), std::string::npos) << missing;

  const std::string not_b64 = load_error(dir, kubeconfig("https://h:1", "    certificate-authority-data: '%%%'\n", "    token: x\n"));
  EXPECT_EQ(not_b64, where + ": certificate-authority-data is not base64");

  write_text(dir / "empty-token", "\n");
  const std::string empty = load_error(dir, kubeconfig("https://h:1", "", "    tokenFile: " + (dir / "empty-token").string() + "\n"));
  EXPECT_EQ(empty, where + ": tokenFile: " + (dir / "empty-token").string() + ": the token is empty");
}

TEST(ReadToken, TrimsTheLineBreakAndNamesWhatItIsFor) {
  ScratchDir dir;
  write_text(dir / "t", "secret\r\n");
  auto t = kube::read_token((dir / "t").string(), "the token");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(*t, "secret");
  auto gone = kube::read_token((dir / "gone").string(), "service account token");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().rfind("service account token: ", 0), 0u) << gone.error();
  EXPECT_NE(gone.error().find((dir / "gone").string()), std::string::npos) << gone.error();
}

TEST(Kubeconfig, ExecPluginTokenAndFailures) {
  ScratchDir dir;
  const std::string where = "context t in " + (dir / "config").string();
  const auto plugin = [&](const std::string& name, const std::string& body) {
    write_text(dir / name, "#!/bin/sh\n" + body);
    chmod((dir / name).c_str(), 0755);
    return "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: " + (dir / name).string() +
           "\n      args: [one]\n      env: [{name: SHM_TEST_WORD, value: two}]\n";
  };
  // The plugin sees its args, its env and KUBERNETES_EXEC_INFO, as client-go runs it.
  const auto a = load(dir, kubeconfig("https://h:1", "", plugin("ok.sh",
      "[ \"$1\" = one ] && [ \"$SHM_TEST_WORD\" = two ] || exit 4\n"
      "echo \"$KUBERNETES_EXEC_INFO\" | grep -q '\"kind\":\"ExecCredential\"' || exit 5\n"
      "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
      "\"status\":{\"token\":\"from-exec\"}}'\n")));
  EXPECT_EQ(a.token, "from-exec");
  EXPECT_EQ(load_error(dir, kubeconfig("https://h:1", "", plugin("fail.sh", "exit 3\n"))),
            where + ": exec credential plugin " + (dir / "fail.sh").string() + " failed (exit status 3)");
  EXPECT_EQ(load_error(dir, kubeconfig("https://h:1", "", plugin("junk.sh", "echo not json\n"))),
            where + ": exec credential plugin " + (dir / "junk.sh").string() + " printed no ExecCredential");
  EXPECT_EQ(load_error(dir, kubeconfig("https://h:1", "", plugin("empty.sh", "echo '{\"status\":{}}'\n"))),
            where + ": exec credential plugin " + (dir / "empty.sh").string() +
                " gave neither a token nor a client certificate");
  EXPECT_EQ(load_error(dir, kubeconfig("https://h:1", "", "    exec: {apiVersion: v1}\n")), where + ": exec has no command");
}

TEST(LoadAccess, LookupOrderAndTheInClusterFallback) {
  ScratchDir dir;
  EnvGuard env;
  write_text(dir / "first", kubeconfig("https://first:1", "", "    token: one\n"));
  write_text(dir / "second", kubeconfig("https://second:2", "", "    token: two\n"));
  std::filesystem::create_directories(dir / "home" / ".kube");
  write_text(dir / "home" / ".kube" / "config", kubeconfig("https://home:3", "", "    token: three\n"));

  env.set("KUBECONFIG", (dir / "first").string() + ":" + (dir / "second").string());
  env.set("HOME", (dir / "home").string());
  auto a = kube::load_access("", "");
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->host, "first");  // KUBECONFIG's first file
  auto flag = kube::load_access((dir / "second").string(), "");
  ASSERT_TRUE(flag) << flag.error();
  EXPECT_EQ(flag->host, "second");  // the flag wins over KUBECONFIG

  env.set("KUBECONFIG", std::nullopt);
  a = kube::load_access("", "");
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->host, "home");

  env.set("HOME", (dir / "nowhere").string());
  env.set("KUBERNETES_SERVICE_HOST", std::nullopt);
  a = kube::load_access("", "");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error(), "no kubeconfig: give --kubeconfig, set KUBECONFIG, or create ~/.kube/config");

  if (std::filesystem::exists("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")) return;  // inside a pod
  env.set("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  env.set("KUBERNETES_SERVICE_PORT", "443");
  a = kube::load_access("", "");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().rfind("service account CA: ", 0), 0u) << a.error();
  EXPECT_NE(a.error().find("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"), std::string::npos) << a.error();
}

TEST(Access, AtKubeletKeepsTheTokenOnly) {
  kube::Access a;
  a.where = "context t";
  a.host = "api";
  a.port = 6443;
  a.base_path = "/k8s/clusters/c-1";
  a.ca_pem = "api CA";
  a.token = "tok";
  const auto k = kube::at_kubelet(a, "10.0.0.7", 10250, "kubelet CA", true);
  EXPECT_EQ(k.host, "10.0.0.7");
  EXPECT_EQ(k.port, 10250);
  EXPECT_EQ(k.base_path, "");
  EXPECT_EQ(k.ca_pem, "kubelet CA");
  EXPECT_TRUE(k.insecure);
  EXPECT_EQ(k.token, "tok");
  EXPECT_EQ(k.where, "the kubelet at 10.0.0.7:10250");
}

TEST(Access, ErrorMessageIsTheStatusMessageElseTheBody) {
  kube::Response r;
  r.status = 403;
  r.body = {{"kind", "Status"}, {"message", "pods is forbidden"}};
  r.text = r.body.dump();
  EXPECT_EQ(kube::error_message(r), "pods is forbidden");
  r.body = nullptr;
  r.text = "upstream connect error\n\n";
  EXPECT_EQ(kube::error_message(r), "upstream connect error");
  r.status = 503;
  r.text = "";
  EXPECT_EQ(kube::error_message(r), "HTTP 503");
  r.text = std::string(400, 'x');
  EXPECT_EQ(kube::error_message(r).size(), 300u);
}

namespace {

// An HTTPS server on a loopback port the kernel picks, with `serving`'s certificate; with
// `client_ca`, it asks for a client certificate signed by it.
class LoopbackServer {
 public:
  explicit LoopbackServer(const Pem& serving, const Pem* client_ca = nullptr) {
    auto cert = parse_cert(serving.cert);
    std::unique_ptr<BIO, decltype(&BIO_free)> kb(BIO_new_mem_buf(serving.key.data(), static_cast<int>(serving.key.size())), BIO_free);
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
    X509_STORE* store = nullptr;
    if (client_ca) {
      store = X509_STORE_new();
      auto c = parse_cert(client_ca->cert);
      X509_STORE_add_cert(store, c.get());
    }
    server_ = std::make_unique<httplib::SSLServer>(cert.get(), key.get(), store);
    server_->Get(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      last_path = req.path;
      last_auth = req.get_header_value("Authorization");
      if (req.path == "/text") return res.set_content("plain words\n", "text/plain");
      res.status = req.path == "/forbidden" ? 403 : 200;
      res.set_content(res.status == 200 ? R"({"kind":"PodList","items":[]})" : R"({"kind":"Status","message":"no"})",
                      "application/json");
    });
    server_->Post("/events", [this](const httplib::Request& req, httplib::Response& res) {
      last_body = req.body;
      res.status = 201;
      res.set_content(req.body, "application/json");
    });
    port = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::yield();
  }
  ~LoopbackServer() {
    server_->stop();
    thread_.join();
  }

  int port = 0;
  std::string last_path, last_auth, last_body;

 private:
  static std::unique_ptr<X509, decltype(&X509_free)> parse_cert(const std::string& pem) {
    std::unique_ptr<BIO, decltype(&BIO_free)> b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
    return {PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr), X509_free};
  }
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
};

class Requests : public ::testing::Test {
 protected:
  Pem ca = make_ca();
  Pem serving = make_leaf(ca, "loopback", "IP:127.0.0.1");
  kube::Access access(int port) const {
    kube::Access a;
    a.where = "context test";
    a.host = "127.0.0.1";
    a.port = port;
    a.ca_pem = ca.cert;
    a.token = "sekret";
    return a;
  }
};

}  // namespace

TEST_F(Requests, GetVerifiesTheCaSendsTheTokenAndPrefixesTheBasePath) {
  LoopbackServer server(serving);
  auto a = access(server.port);
  a.base_path = "/k8s/clusters/c-1";
  auto r = kube::get(a, "/api/v1/pods?limit=1", 5);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body["kind"], "PodList");
  EXPECT_EQ(server.last_path, "/k8s/clusters/c-1/api/v1/pods");
  EXPECT_EQ(server.last_auth, "Bearer sekret");

  auto raw = kube::get(a, "/api/v1/pods", 5, /*raw=*/true);
  ASSERT_TRUE(raw) << raw.error();
  EXPECT_TRUE(raw->body.is_null());  // the caller parses the text
  EXPECT_EQ(raw->text, R"({"kind":"PodList","items":[]})");

  a.base_path.clear();
  auto text = kube::get_within(a, "/text", 2000);
  ASSERT_TRUE(text) << text.error();
  EXPECT_TRUE(text->body.is_null());
  EXPECT_EQ(text->text, "plain words\n");

  auto denied = kube::get(a, "/forbidden", 5);  // any status is a Response
  ASSERT_TRUE(denied) << denied.error();
  EXPECT_EQ(denied->status, 403);
  EXPECT_EQ(kube::error_message(*denied), "no");
}

TEST_F(Requests, PostSendsTheJsonBody) {
  LoopbackServer server(serving);
  auto r = kube::post(access(server.port), "/events", {{"kind", "Event"}, {"reason", "ShmOutgrown"}}, 5);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(nlohmann::json::parse(server.last_body)["reason"], "ShmOutgrown");
  EXPECT_EQ(r->body["kind"], "Event");
}

TEST_F(Requests, AnotherCaIsRefusedWithOpenSslsReason) {
  LoopbackServer server(serving);
  auto a = access(server.port);
  a.ca_pem = make_ca("someone else").cert;  // the kubeconfig's CA alone is trusted, not the system's
  auto r = kube::get(a, "/", 5);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().rfind("cannot reach 127.0.0.1:" + std::to_string(server.port) + " (context test): ", 0), 0u)
      << r.error();
  EXPECT_NE(r.error().find("unable to get local issuer certificate"), std::string::npos) << r.error();

  a.insecure = true;  // insecure-skip-tls-verify
  auto ok = kube::get(a, "/", 5);
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->status, 200);
}

TEST_F(Requests, TheHostNameIsChecked) {
  LoopbackServer server(make_leaf(ca, "loopback", "DNS:api.example"));  // no IP SAN for 127.0.0.1
  auto r = kube::get(access(server.port), "/", 5);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("IP address mismatch"), std::string::npos) << r.error();
}

TEST_F(Requests, ClientCertificateFromPemData) {
  const Pem client_ca = make_ca("clients");
  const Pem alice = make_leaf(client_ca, "alice", "");
  LoopbackServer server(serving, &client_ca);
  auto a = access(server.port);
  auto without = kube::get(a, "/", 5);
  EXPECT_FALSE(without) << "the server asks for a client certificate";
  a.client_cert_pem = alice.cert;
  a.client_key_pem = alice.key;
  auto with = kube::get(a, "/", 5);
  ASSERT_TRUE(with) << with.error();
  EXPECT_EQ(with->status, 200);
  a.client_key_pem = "not a key";
  auto bad = kube::get(a, "/", 5);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "context test: the client certificate or key is not PEM");
}

TEST_F(Requests, NothingListeningIsAFailureNamingTheServer) {
  int port;
  {
    LoopbackServer gone(serving);
    port = gone.port;
  }
  auto r = kube::get_within(access(port), "/", 1000);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().rfind("cannot reach 127.0.0.1:" + std::to_string(port) + " (context test): ", 0), 0u) << r.error();
}
