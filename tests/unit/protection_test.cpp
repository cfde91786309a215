// Pods shmguard missed: the engine's judgement of running pods and the reasons (monitor/protection.h).
#include "monitor/protection.h"

#include <gtest/gtest.h>

#include "inject/inject.h"
#include "monitor/shm_usage.h"
#include "monitor/tracker.h"

using namespace shmguard;
using monitor::Unprotected;
using nlohmann::json;

namespace {

// A PyTorchJob worker as the training operator creates it: its label, torchrun, the user's hints.
json worker(const std::string& name, const std::string& ns = "team-a", const std::string& created = "2026-12-06T10:00:00Z") {
  return {{"apiVersion", "v1"}, {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}, {"creationTimestamp", created},
                        {"labels", {{"training.kubeflow.org/job-name", "bert"}, {"training.kubeflow.org/replica-type", "worker"}}},
                        {"annotations", {{"shmguard.io/batch-size", "64"}, {"shmguard.io/num-workers", "8"},
                                         {"shmguard.io/sample-size", "1Mi"}}},
                        {"ownerReferences", {{{"kind", "PyTorchJob"}, {"name", "bert"}, {"controller", true}}}}}},
          {"spec", {{"nodeName", "node-a"},
                    {"containers", {{{"name", "pytorch"}, {"image", "ghcr.io/acme/bert:1"},
                                     {"command", {"torchrun", "--nproc-per-node=1", "train.py"}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

// The configuration the chart renders: kube-system and the release's namespace left out, and the
// objectSelector's opt-out label.
json configuration() {
  return {{"metadata", {{"name", "shmguard-ml-system"}, {"creationTimestamp", "2026-12-06T09:00:00Z"}}},
          {"webhooks", {{{"name", "other.example.com"}},
                        {{"name", "pods.shmguard.io"},
                         {"namespaceSelector", {{"matchExpressions", {{{"key", "kubernetes.io/metadata.name"}, {"operator", "NotIn"},
                                                                       {"values", {"kube-system", "ml-system"}}}}}}},
                         {"objectSelector", {{"matchExpressions", {{{"key", "shmguard.io/inject"}, {"operator", "NotIn"},
                                                                    {"values", {"false"}}}}}}}}}}};
}

struct Fixture {
  config::Config cfg;
  monitor::Judge judge;
  Fixture() {
    judge.cfg = &cfg;
    judge.webhook = monitor::read_webhook_view(configuration(), "pods.shmguard.io");
  }
};

// What the pod is once the webhook has patched it.
json injected(const json& pod, const config::Config& cfg) { return pod.patch(inject::inject_pod(pod, cfg).patch); }

}  // namespace

TEST(Selector, MatchLabelsAndEveryOperator) {
  const json labels = {{"team", "ml"}, {"tier", "gpu"}};
  EXPECT_TRUE(monitor::selector_matches(nullptr, &labels));
  EXPECT_TRUE(monitor::selector_matches(json::object(), nullptr));
  EXPECT_TRUE(monitor::selector_matches({{"matchLabels", {{"team", "ml"}}}}, &labels));
  EXPECT_FALSE(monitor::selector_matches({{"matchLabels", {{"team", "web"}}}}, &labels));
  EXPECT_FALSE(monitor::selector_matches({{"matchLabels", {{"team", "ml"}}}}, nullptr));
  auto one = [&](const char* key, const char* op, json values) {
    json e = {{"key", key}, {"operator", op}};
    if (!values.is_null()) e["values"] = std::move(values);
    return monitor::selector_matches({{"matchExpressions", {e}}}, &labels);
  };
  EXPECT_TRUE(one("tier", "In", {"cpu", "gpu"}));
  EXPECT_FALSE(one("tier", "In", {"cpu"}));
  EXPECT_FALSE(one("absent", "In", {"x"}));
  EXPECT_TRUE(one("tier", "NotIn", {"cpu"}));
  EXPECT_FALSE(one("tier", "NotIn", {"gpu"}));
  EXPECT_TRUE(one("absent", "NotIn", {"x"}));  // as the API server: no key, not in
  EXPECT_TRUE(one("team", "Exists", nullptr));
  EXPECT_FALSE(one("absent", "Exists", nullptr));
  EXPECT_TRUE(one("absent", "DoesNotExist", nullptr));
  EXPECT_FALSE(one("team", "DoesNotExist", nullptr));
  EXPECT_FALSE(one("team", "Gt", {"1"}));
}

TEST(WebhookView, TheShmguardEntryOfTheConfiguration) {
  const auto w = monitor::read_webhook_view(configuration(), "pods.shmguard.io");
  EXPECT_EQ(w.name, "shmguard-ml-system");
  EXPECT_EQ(w.created, "2026-12-06T09:00:00Z");
  EXPECT_TRUE(w.error.empty());
  EXPECT_EQ(w.namespace_selector["matchExpressions"][0]["values"][1], "ml-system");
  EXPECT_EQ(monitor::read_webhook_view({{"metadata", {{"name", "x"}}}}, "pods.shmguard.io").error, "it has no webhooks");
}

TEST(Judge, AnInjectedPodIsProtected) {
  Fixture f;
  const json pod = injected(worker("w-0"), f.cfg);
  ASSERT_TRUE(pod["spec"].contains("volumes"));
  EXPECT_EQ(monitor::judge_pod(pod, f.judge).reason, Unprotected::kNo);
}

TEST(Judge, ATrainingPodWithoutItIsUnprotectedWithTheEnginesSize) {
  Fixture f;
  const auto p = monitor::judge_pod(worker("w-0"), f.judge);
  EXPECT_EQ(p.reason, Unprotected::kFailedOpen);
  EXPECT_EQ(p.need, inject::inject_pod(worker("w-0"), f.cfg).size());
  EXPECT_GT(p.need, 64u << 20);
  EXPECT_EQ(p.created, "2026-12-06T10:00:00Z");
  const std::string msg = monitor::unprotected_message(p, "team-a", f.judge);
  EXPECT_NE(msg.find("created at 2026-12-06T10:00:00Z, after MutatingWebhookConfiguration shmguard-ml-system"), std::string::npos) << msg;
  EXPECT_NE(msg.find("apiserver_admission_webhook_fail_open_count"), std::string::npos) << msg;
}

TEST(Judge, EachReasonForAMissedPod) {
  Fixture f;
  EXPECT_EQ(monitor::judge_pod(worker("w", "team-a", "2026-12-05T23:59:59Z"), f.judge).reason, Unprotected::kBeforeInstall);
  // ml-system is left out by name: the label every namespace has says so without reading it.
  EXPECT_EQ(monitor::judge_pod(worker("w", "ml-system"), f.judge).reason, Unprotected::kNamespaceNotSelected);
  // A selector on a namespace label the pods' namespace lacks.
  f.judge.webhook.namespace_selector = {{"matchLabels", {{"shmguard", "on"}}}};
  f.judge.namespace_labels["team-a"] = {{"kubernetes.io/metadata.name", "team-a"}};
  EXPECT_EQ(monitor::judge_pod(worker("w"), f.judge).reason, Unprotected::kNamespaceNotSelected);
  f.judge.namespace_labels["team-a"]["shmguard"] = "on";
  EXPECT_EQ(monitor::judge_pod(worker("w"), f.judge).reason, Unprotected::kFailedOpen);
  f.judge.webhook.object_selector = {{"matchLabels", {{"shmguard", "on"}}}};
  EXPECT_EQ(monitor::judge_pod(worker("w"), f.judge).reason, Unprotected::kObjectNotSelected);
  f.judge.webhook.object_selector = nullptr;
  f.cfg.mode = config::Mode::kAudit;
  EXPECT_EQ(monitor::judge_pod(worker("w"), f.judge).reason, Unprotected::kAuditMode);
  f.judge.webhook.error = "cannot read MutatingWebhookConfiguration x: forbidden";
  const auto p = monitor::judge_pod(worker("w"), f.judge);
  EXPECT_EQ(p.reason, Unprotected::kNotInjected);
  EXPECT_NE(monitor::unprotected_message(p, "team-a", f.judge).find("forbidden"), std::string::npos);
}

TEST(Judge, NotTrainingOptedOutOrHostIPCIsNoConcern) {
  Fixture f;
  json web = worker("web");
  web["metadata"].erase("labels");
  web["metadata"].erase("annotations");
  web["spec"]["containers"][0] = {{"name", "nginx"}, {"image", "nginx:1.27"}};
  EXPECT_EQ(monitor::judge_pod(web, f.judge).reason, Unprotected::kNo);
  json out = worker("out");
  out["metadata"]["labels"]["shmguard.io/inject"] = "false";
  EXPECT_EQ(monitor::judge_pod(out, f.judge).reason, Unprotected::kNo);
  json ipc = worker("ipc");
  ipc["spec"]["hostIPC"] = true;
  EXPECT_EQ(monitor::judge_pod(ipc, f.judge).reason, Unprotected::kNo);
}

TEST(Judge, AUsersOwnDevShmBelowItsHintsIsTooSmall) {
  Fixture f;
  json own = worker("own");
  own["spec"]["containers"][0]["volumeMounts"] = {{{"name", "dshm"}, {"mountPath", "/dev/shm"}}};
  own["spec"]["volumes"] = {{{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}}};
  auto p = monitor::judge_pod(own, f.judge);
  EXPECT_EQ(p.reason, Unprotected::kTooSmall);
  EXPECT_EQ(p.has, 1ULL << 30);
  EXPECT_GT(p.need, 1ULL << 30);
  EXPECT_NE(monitor::unprotected_message(p, "team-a", f.judge).find("sizeLimit 1Gi"), std::string::npos);
  own["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = "64Gi";
  EXPECT_EQ(monitor::judge_pod(own, f.judge).reason, Unprotected::kNo);
}

TEST(Judge, RunningPodsKeepsTheUnprotectedWithoutAVolumeAndLeavesOutTheRest) {
  Fixture f;
  json web = worker("web");
  web["metadata"].erase("labels");
  web["metadata"].erase("annotations");
  web["spec"]["containers"][0] = {{"name", "nginx"}, {"image", "nginx:1.27"}};
  json pending = worker("pending");
  pending["status"]["phase"] = "Pending";
  const json list = {{"items", {injected(worker("ok"), f.cfg), worker("missed"), web, pending}}};
  EXPECT_EQ(monitor::running_pods(list, nullptr).size(), 1u);  // unjudged: the /dev/shm volumes only
  const auto pods = monitor::running_pods(list, &f.judge);
  ASSERT_EQ(pods.size(), 2u);
  EXPECT_EQ(pods[0].name, "ok");
  EXPECT_EQ(pods[0].volume, "shmguard-dshm");
  EXPECT_EQ(pods[0].protection.reason, Unprotected::kNo);
  EXPECT_EQ(pods[1].name, "missed");
  EXPECT_EQ(pods[1].volume, "");
  EXPECT_EQ(pods[1].owner_kind, "PyTorchJob");
  EXPECT_EQ(pods[1].protection.reason, Unprotected::kFailedOpen);
}

TEST(Judge, TheParsedPodListKeepsWhatTheEngineReads) {
  Fixture f;
  json pod = worker("missed");
  pod["metadata"]["managedFields"] = {{{"manager", "kubectl"}, {"fieldsV1", {{"f:spec", json::object()}}}}};
  pod["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
  const json parsed = monitor::parse_pod_list(json{{"items", {pod}}}.dump());
  EXPECT_FALSE(parsed["items"][0]["metadata"].contains("managedFields"));
  EXPECT_FALSE(parsed["items"][0]["status"].contains("conditions"));
  const auto pods = monitor::running_pods(parsed, &f.judge);
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].protection.reason, Unprotected::kFailedOpen);
  EXPECT_EQ(pods[0].protection.need, inject::inject_pod(pod, f.cfg).size());
}

TEST(Tracker, UnprotectedPodsAreMetricsAndEachAnEventOnce) {
  Fixture f;
  auto pods = monitor::running_pods({{"items", {worker("a"), worker("b"), worker("c", "ml-system")}}}, &f.judge);
  ASSERT_EQ(pods.size(), 3u);
  monitor::Tracker t;
  t.update(pods, {}, 100);
  EXPECT_EQ(t.newly_unprotected().size(), 3u);
  const std::string text = t.exposition(100);
  EXPECT_NE(text.find("shmguard_pod_unprotected{namespace=\"team-a\",pod=\"a\",owner_kind=\"PyTorchJob\",owner_name=\"bert\","
                      "reason=\"failed-open\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shmguard_unprotected_pods{namespace=\"team-a\",reason=\"failed-open\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shmguard_unprotected_pods{namespace=\"ml-system\",reason=\"namespace-not-selected\"} 1\n"), std::string::npos);
  EXPECT_EQ(text.find("shmguard_shm_used_bytes{namespace=\"team-a\",pod=\"a\""), std::string::npos);  // no figures: no volume
  t.update(pods, {}, 130);
  EXPECT_TRUE(t.newly_unprotected().empty());
  pods.pop_back();
  t.update(pods, {}, 160);
  EXPECT_EQ(t.exposition(160).find("ml-system"), std::string::npos);  // gone with the pod
}
