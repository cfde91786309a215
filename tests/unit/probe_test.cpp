// The probe module: the AdmissionReview sent for a pod, URL parsing, how answers read and are
// classified, and both clients against an HTTPS server on loopback (no cluster).
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/pem.h>
#include <stdlib.h>

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "probe/api_server.h"
#include "probe/url.h"
#include "probe/webhook.h"
#include "tls_test_util.h"

namespace shmguard::probe {
namespace {

using nlohmann::json;
using test::make_ca;
using test::make_leaf;
using test::Pem;

const json kPod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}},
                   {"spec", {{"containers", json::array({{{"name", "c"}}})}}}};

// The patch shmguard's webhook answers with: a volume named as inject names it, sized 1Gi.
json shm_patch() {
  return json::array({{{"op", "add"}, {"path", "/spec/volumes"},
                       {"value", json::array({{{"name", "shmguard-dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}}})}}});
}

TEST(ReviewFor, IsADryRunCreateOfThePodInItsNamespace) {
  const json r = review_for(kPod, "team-a", 3);
  EXPECT_EQ(r["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(r["kind"], "AdmissionReview");
  const json& q = r["request"];
  EXPECT_EQ(q["uid"], "shmguard-review-3");
  EXPECT_EQ(q["operation"], "CREATE");
  EXPECT_EQ(q["namespace"], "team-a");
  EXPECT_EQ(q["dryRun"], true);
  EXPECT_EQ(q["object"], kPod);
  EXPECT_TRUE(q["oldObject"].is_null());
  EXPECT_EQ(q["kind"], (json{{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}));
  EXPECT_EQ(q["requestKind"], q["kind"]);
  EXPECT_EQ(q["resource"], (json{{"group", ""}, {"version", "v1"}, {"resource", "pods"}}));
  EXPECT_EQ(q["userInfo"]["username"], "shmguard-review");
  EXPECT_EQ(q["options"]["kind"], "CreateOptions");
}

TEST(ParseUrl, ReadsHostPortAndPath) {
  auto u = parse_url("https://webhook.example:8443/hook", "/mutate");
  ASSERT_TRUE(u) << u.error();
  EXPECT_EQ(u->host, "webhook.example");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->path, "/hook");

  auto d = parse_url("https://localhost/", "/mutate");  // a bare slash keeps the default path
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->port, 443);
  EXPECT_EQ(d->path, "/mutate");

  auto v6 = parse_url("https://[::1]:9443", "");
  ASSERT_TRUE(v6) << v6.error();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 9443);
  EXPECT_EQ(v6->path, "");
}

TEST(ParseUrl, SaysWhatIsWrongAndNamesTheFlag) {
  EXPECT_EQ(parse_url("http://x", "/m").error(), R"(--server must be an https:// URL, got "http://x")");
  EXPECT_EQ(parse_url("https://[::1:8443", "/m").error(), "--server: unterminated IPv6 address");
  EXPECT_EQ(parse_url("https://x:84a3", "/m").error(), R"(--server: bad port "84a3")");
  EXPECT_EQ(parse_url("https://x:65536", "/m").error(), R"(--server: bad port "65536")");
  EXPECT_EQ(parse_url("https://x:123456", "/m").error(), R"(--server: bad port "123456")");
  EXPECT_EQ(parse_url("https://:8443/m", "/m").error(), R"(--server: no host in "https://:8443/m")");
  EXPECT_EQ(parse_url("ftp://x", "", "--api").error(), R"(--api must be an https:// URL, got "ftp://x")");
}

TEST(Decision, NamesTheInjectedSizeOrWhatElseHappened) {
  EXPECT_EQ(injected_decision(kPod.patch(shm_patch())), "patched: /dev/shm 1Gi");
  EXPECT_EQ(injected_decision(kPod), "");
  EXPECT_EQ(injected_decision(json("not a pod")), "");
  EXPECT_EQ(injected_decision(json{{"spec", {{"volumes", json::array({{{"name", "shmguard-dshm"}, {"emptyDir", json::object()}}})}}}}),
            "patched: /dev/shm ?");

  EXPECT_EQ(decision_of(kPod, false, shm_patch()), "denied");
  EXPECT_EQ(decision_of(kPod, true, nullptr), "allowed unchanged");
  EXPECT_EQ(decision_of(kPod, true, shm_patch()), "patched: /dev/shm 1Gi");
  const json other = json::array({{{"op", "add"}, {"path", "/metadata/labels"}, {"value", {{"a", "b"}}}}});
  EXPECT_EQ(decision_of(kPod, true, other), "patched");
}

TEST(ReadAnswer, DecodesThePatchAndKeepsTheWarnings) {
  const json body = {{"response", {{"uid", "u"}, {"allowed", true}, {"patchType", "JSONPatch"},
                                   {"patch", test::base64_encode(shm_patch().dump())},
                                   {"warnings", json::array({"one"})}}}};
  const WebhookAnswer a = read_answer(kPod, 200, body.dump());
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(a.patch, shm_patch());
  EXPECT_EQ(a.warnings, json::array({"one"}));
  EXPECT_EQ(a.decision, "patched: /dev/shm 1Gi");

  const WebhookAnswer refused = read_answer(kPod, 500, "boom");
  EXPECT_EQ(refused.status, 500);
  EXPECT_EQ(refused.body, "boom");
  EXPECT_EQ(refused.decision, "");

  const WebhookAnswer junk = read_answer(kPod, 200, "not json");
  EXPECT_FALSE(junk.allowed);
  EXPECT_TRUE(junk.patch.is_null());
  EXPECT_EQ(junk.decision, "denied");
}

TEST(WarningText, UnquotesTheRfc7234Text) {
  EXPECT_EQ(warning_text(R"(299 - "shmguard would inject /dev/shm 1Gi")"), "shmguard would inject /dev/shm 1Gi");
  EXPECT_EQ(warning_text(R"(299 - "say \"hi\"")"), R"(say "hi")");
  EXPECT_EQ(warning_text("no quotes"), "no quotes");
}

TEST(Classify, TellsAnsweredUnchangedAndRefusedApart) {
  const Attempt injected = classify(201, kPod.patch(shm_patch()).dump(), {});
  EXPECT_EQ(injected.kind, Attempt::Kind::kAnswered);
  EXPECT_EQ(injected.text, "patched: /dev/shm 1Gi");

  const Attempt audit = classify(201, kPod.dump(), {R"(299 - "shmguard would inject /dev/shm 1Gi")"});
  EXPECT_EQ(audit.kind, Attempt::Kind::kAnswered);
  EXPECT_EQ(audit.text, "allowed unchanged");
  EXPECT_EQ(audit.warnings, std::vector<std::string>{"shmguard would inject /dev/shm 1Gi"});

  const Attempt unchanged = classify(200, kPod.dump(), {R"(299 - "something else")"});
  EXPECT_EQ(unchanged.kind, Attempt::Kind::kUnchanged);
  EXPECT_EQ(unchanged.text, "admitted without shmguard's answer (no /dev/shm volume, no shmguard warning)");

  const Attempt forbidden = classify(403, R"({"kind":"Status","message":"pods is forbidden"})", {});
  EXPECT_EQ(forbidden.kind, Attempt::Kind::kRefused);
  EXPECT_EQ(forbidden.text, "the API server answered HTTP 403: pods is forbidden");
  EXPECT_EQ(classify(502, "bad gateway", {}).text, "the API server answered HTTP 502: bad gateway");

  EXPECT_FALSE(shmguard_answered("", {"shmguard would not"}));
  EXPECT_TRUE(shmguard_answered("patched: /dev/shm 1Gi", {}));
}

TEST(LocateApiServer, UsesTheFlagsOrTheServiceAccount) {
  auto given = locate_api_server("https://api.example:6443/base", "/ca.pem", "/token");
  ASSERT_TRUE(given) << given.error();
  EXPECT_EQ(given->url.host, "api.example");
  EXPECT_EQ(given->url.path, "/base");
  EXPECT_EQ(given->ca_file, "/ca.pem");
  EXPECT_EQ(given->token_file, "/token");

  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto in_pod = locate_api_server("", "", "");
  ASSERT_TRUE(in_pod) << in_pod.error();
  EXPECT_EQ(in_pod->url.host, "fd00::1");
  EXPECT_EQ(in_pod->url.port, 443);
  EXPECT_EQ(in_pod->url.path, "");
  EXPECT_EQ(in_pod->ca_file, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
  EXPECT_EQ(in_pod->token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");

  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto outside = locate_api_server("", "", "");
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.error().find("KUBERNETES_SERVICE_HOST/PORT are not set"), std::string::npos);
  ::unsetenv("KUBERNETES_SERVICE_PORT");

  EXPECT_EQ(locate_api_server("http://api", "", "").error(), R"(--server must be an https:// URL, got "http://api")");
}

// An HTTPS server on a loopback port the kernel picks, answering every POST with `reply`, and
// keeping what it was sent.
class Loopback {
 public:
  using Reply = std::function<void(const httplib::Request&, httplib::Response&)>;
  Loopback(const Pem& serving, Reply reply) {
    std::unique_ptr<BIO, decltype(&BIO_free)> cb(BIO_new_mem_buf(serving.cert.data(), static_cast<int>(serving.cert.size())), BIO_free);
    std::unique_ptr<BIO, decltype(&BIO_free)> kb(BIO_new_mem_buf(serving.key.data(), static_cast<int>(serving.key.size())), BIO_free);
    std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr), X509_free);
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
    server_ = std::make_unique<httplib::SSLServer>(cert.get(), key.get());
    server_->Post(R"(/.*)", [this, reply](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        paths.push_back(req.target);
        bodies.push_back(req.body);
        auth = req.get_header_value("Authorization");
      }
      reply(req, res);
    });
    port = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::yield();
  }
  ~Loopback() {
    server_->stop();
    thread_.join();
  }
  int port = 0;
  std::vector<std::string> paths, bodies;
  std::string auth;

 private:
  std::mutex mu_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
};

class Clients : public ::testing::Test {
 protected:
  Pem ca = make_ca();
  test::ScratchDir dir;
  std::string ca_file() {
    test::write_text(dir / "ca.pem", ca.cert);
    return (dir / "ca.pem").string();
  }
};

TEST_F(Clients, TheWebhookIsAskedUnderItsServiceNameOverOneConnection) {
  Loopback hook(make_leaf(ca, "shmguard", "DNS:shmguard.kube-system.svc"), [](const httplib::Request& req, httplib::Response& res) {
    const json review = json::parse(req.body);
    const json answer = {{"response", {{"uid", review["request"]["uid"]}, {"allowed", true},
                                       {"patch", test::base64_encode(shm_patch().dump())}}}};
    res.set_content(answer.dump(), "application/json");
  });
  const std::string server = "https://127.0.0.1:" + std::to_string(hook.port) + "/mutate";
  WebhookClient cli({.server = server, .url = *parse_url(server, "/mutate"),
                     .server_name = "shmguard.kube-system.svc", .ca_file = ca_file(), .timeout_s = 5});
  for (int i = 1; i <= 2; ++i) {
    auto a = cli.ask(kPod, "team-a");
    ASSERT_TRUE(a) << a.error();
    EXPECT_EQ(a->status, 200);
    EXPECT_EQ(a->decision, "patched: /dev/shm 1Gi");
  }
  ASSERT_EQ(hook.bodies.size(), 2u);
  EXPECT_EQ(hook.paths[0], "/mutate");
  EXPECT_EQ(json::parse(hook.bodies[0])["request"]["uid"], "shmguard-review-1");
  EXPECT_EQ(json::parse(hook.bodies[1])["request"]["uid"], "shmguard-review-2");
  EXPECT_EQ(json::parse(hook.bodies[1])["request"]["namespace"], "team-a");
}

TEST_F(Clients, NoAnswerSaysWhy) {
  const Pem serving = make_leaf(ca, "shmguard", "DNS:shmguard.kube-system.svc");
  int port = 0;
  {
    Loopback gone(serving, [](const httplib::Request&, httplib::Response&) {});
    port = gone.port;
  }  // nothing listens there now
  const std::string server = "https://127.0.0.1:" + std::to_string(port);
  WebhookClient refused({.server = server, .url = *parse_url(server, "/mutate"),
                         .server_name = "shmguard.kube-system.svc", .ca_file = ca_file(), .timeout_s = 2});
  auto r = refused.ask(kPod, "default");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().rfind("cannot reach " + server + " (certificate verified for shmguard.kube-system.svc): ", 0), 0u)
      << r.error();
  EXPECT_NE(r.error().find("`kubectl -n kube-system get endpoints shmguard` lists its ready pods"), std::string::npos)
      << r.error();

  Loopback hook(serving, [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
  const std::string direct = "https://127.0.0.1:" + std::to_string(hook.port);
  WebhookClient wrong_name({.server = direct, .url = *parse_url(direct, "/mutate"), .server_name = "127.0.0.1",
                            .ca_file = ca_file(), .timeout_s = 2});
  auto n = wrong_name.ask(kPod, "default");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().find("the serving certificate is not valid for 127.0.0.1 (use --server-name)"), std::string::npos)
      << n.error();
}

TEST_F(Clients, ThroughTheApiServerAPodIsCreatedAsADryRunWithTheToken) {
  Loopback api(make_leaf(ca, "api", "IP:127.0.0.1"), [](const httplib::Request& req, httplib::Response& res) {
    res.status = 201;
    res.set_header("Warning", R"(299 - "shmguard would inject /dev/shm 1Gi")");
    res.set_content(req.body, "application/json");
  });
  test::write_text(dir / "token", "sekret\n");
  auto located = locate_api_server("https://127.0.0.1:" + std::to_string(api.port) + "/k8s", ca_file(),
                                 (dir / "token").string());
  ASSERT_TRUE(located) << located.error();
  ApiServer where = *located;
  const Attempt at = ask_through_api(where, "team-a", kPod, 5);
  EXPECT_EQ(at.kind, Attempt::Kind::kAnswered) << at.text;
  EXPECT_EQ(at.text, "allowed unchanged");
  EXPECT_EQ(at.warnings, std::vector<std::string>{"shmguard would inject /dev/shm 1Gi"});
  ASSERT_EQ(api.paths.size(), 1u);
  EXPECT_EQ(api.paths[0], "/k8s/api/v1/namespaces/team-a/pods?dryRun=All&fieldManager=shmguard-review");
  EXPECT_EQ(api.auth, "Bearer sekret");

  ApiServer no_token = where;
  no_token.token_file = (dir / "missing").string();
  EXPECT_EQ(ask_through_api(no_token, "team-a", kPod, 5).kind, Attempt::Kind::kRefused);

  ApiServer nowhere = where;
  nowhere.token_file = (dir / "token").string();
  nowhere.url.port = 1;  // nothing listens
  const Attempt lost = ask_through_api(nowhere, "team-a", kPod, 2);
  EXPECT_EQ(lost.kind, Attempt::Kind::kUnreachable);
  EXPECT_EQ(lost.text.rfind("cannot reach the API server at 127.0.0.1:1: ", 0), 0u) << lost.text;
}

}  // namespace
}  // namespace shmguard::probe
