// The monitor's pods from a list and a watch: each event type, 410 Gone, the engine's assessment
// made once per event, memory kept to the fields used (monitor/pod_store.h).
#include "monitor/pod_store.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "inject/inject.h"

using namespace shmguard;
using monitor::PodStore;
using monitor::WatchStep;
using nlohmann::json;

namespace {

// A running pod with shmguard's /dev/shm on `node`.
json sized(const std::string& name, const std::string& rv, const std::string& node = "node-a") {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"resourceVersion", rv},
                        {"managedFields", {{{"manager", "kubelet"}}}},
                        {"ownerReferences", {{{"kind", "Job"}, {"name", "job-" + name}, {"controller", true}}}}}},
          {"spec", {{"nodeName", node},
                    {"containers", {{{"name", "train"}, {"image", "ghcr.io/acme/train:1"},
                                     {"env", {{{"name", "BIG"}, {"value", std::string(4096, 'x')}}}},
                                     {"volumeMounts", {{{"name", "shmguard-dshm"}, {"mountPath", "/dev/shm"}}}}}}},
                    {"volumes", {{{"name", "shmguard-dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "8Gi"}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

// A training pod the webhook never answered for: torchrun, its label, no /dev/shm.
json missed(const std::string& name, const std::string& rv) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"resourceVersion", rv},
                        {"creationTimestamp", "2026-12-06T10:00:00Z"},
                        {"labels", {{"training.kubeflow.org/job-name", "bert"}}}}},
          {"spec", {{"nodeName", "node-a"},
                    {"containers", {{{"name", "pytorch"}, {"image", "ghcr.io/acme/bert:1"},
                                     {"command", {"torchrun", "--nproc-per-node=1", "train.py"}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

json plain(const std::string& name, const std::string& rv) {
  return {{"metadata", {{"name", name}, {"namespace", "web"}, {"uid", "uid-" + name}, {"resourceVersion", rv}}},
          {"spec", {{"nodeName", "node-a"}, {"containers", {{{"name", "nginx"}, {"image", "nginx:1"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

json event(const char* type, const json& obj) { return {{"type", type}, {"object", obj}}; }

json page(std::vector<json> items, const std::string& rv) {
  return {{"kind", "PodList"}, {"metadata", {{"resourceVersion", rv}}}, {"items", items}};
}

std::vector<std::string> names(const PodStore& s, const monitor::Judge* j = nullptr) {
  std::vector<std::string> out;
  for (const auto& p : s.pods(j)) out.push_back(p.name);
  std::sort(out.begin(), out.end());
  return out;
}

PodStore listed(const config::Config* cfg, std::vector<json> items, const std::string& rv) {
  PodStore s(cfg);
  auto l = s.start_listing();
  l.add_page(page(std::move(items), rv), cfg);
  s.finish_listing(std::move(l), rv);
  return s;
}

}  // namespace

TEST(PodStore, AListKeepsOnlyPodsWithADevShmAndItsResourceVersion) {
  auto s = listed(nullptr, {sized("a", "10"), plain("web", "11"), sized("b", "12")}, "100");
  EXPECT_EQ(names(s), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.resource_version(), "100");
  EXPECT_EQ(s.counts().relists, 1u);
  const auto pods = s.pods(nullptr);
  const auto& a = pods[0].name == "a" ? pods[0] : pods[1];
  EXPECT_EQ(a.owner_kind, "Job");
  EXPECT_EQ(a.node, "node-a");
  EXPECT_EQ(a.size_limit, 8ull << 30);
}

TEST(PodStore, AddedModifiedDeletedAndBookmarkMoveTheResourceVersion) {
  auto s = listed(nullptr, {sized("a", "10")}, "100");
  EXPECT_EQ(s.apply(event("ADDED", sized("b", "101"))), WatchStep::kContinue);
  EXPECT_EQ(names(s), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.resource_version(), "101");
  // A pod that stops running is no longer kept (a watch without the phase selector says MODIFIED).
  json done = sized("a", "102");
  done["status"]["phase"] = "Succeeded";
  EXPECT_EQ(s.apply(event("MODIFIED", done)), WatchStep::kContinue);
  EXPECT_EQ(names(s), (std::vector<std::string>{"b"}));
  // MODIFIED carries the whole pod: a restart is seen.
  json restarted = sized("b", "103");
  restarted["status"]["containerStatuses"] = {{{"name", "train"}, {"restartCount", 2u}}};
  EXPECT_EQ(s.apply(event("MODIFIED", restarted)), WatchStep::kContinue);
  EXPECT_EQ(s.pods(nullptr)[0].restarts, 2u);
  EXPECT_EQ(s.apply(event("BOOKMARK", {{"kind", "Pod"}, {"metadata", {{"resourceVersion", "150"}}}})), WatchStep::kContinue);
  EXPECT_EQ(s.resource_version(), "150");
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.apply(event("DELETED", sized("b", "151"))), WatchStep::kContinue);
  EXPECT_TRUE(names(s).empty());
  EXPECT_EQ(s.resource_version(), "151");
  // A pod never kept, deleted: nothing to do.
  EXPECT_EQ(s.apply(event("DELETED", plain("web", "152"))), WatchStep::kContinue);
  // A pod without a uid is kept by namespace/name.
  json no_uid = sized("c", "153");
  no_uid["metadata"].erase("uid");
  s.apply(event("ADDED", no_uid));
  s.apply(event("DELETED", no_uid));
  EXPECT_TRUE(names(s).empty());
  const auto& c = s.counts();
  EXPECT_EQ(c.added, 2u);
  EXPECT_EQ(c.modified, 2u);
  EXPECT_EQ(c.deleted, 3u);
  EXPECT_EQ(c.bookmarks, 1u);
  EXPECT_EQ(c.relists, 1u);
}

TEST(PodStore, Error410AndTooOldResourceVersionAskForARelist) {
  auto s = listed(nullptr, {sized("a", "10")}, "100");
  const json gone = {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                     {"message", "too old resource version: 100 (2000)"}, {"reason", "Expired"}, {"code", 410}};
  EXPECT_EQ(s.apply(event("ERROR", gone)), WatchStep::kRelist);
  EXPECT_EQ(s.apply(event("ERROR", {{"kind", "Status"}, {"message", "too old resource version: 1 (5)"}})), WatchStep::kRelist);
  EXPECT_EQ(s.apply(event("ERROR", {{"kind", "Status"}, {"reason", "Gone"}})), WatchStep::kRelist);
  // Any other error: watch again from where it was.
  EXPECT_EQ(s.apply(event("ERROR", {{"kind", "Status"}, {"code", 500}, {"message", "internal error"}})), WatchStep::kRewatch);
  EXPECT_EQ(s.apply(json{{"type", "ADDED"}}), WatchStep::kRewatch);
  EXPECT_EQ(s.apply(event("SURPRISE", sized("x", "1"))), WatchStep::kRewatch);
  EXPECT_EQ(s.resource_version(), "100");  // errors never move it
  EXPECT_EQ(names(s), (std::vector<std::string>{"a"}));
  EXPECT_EQ(s.counts().errors, 6u);
  // The relist replaces the pods whole: one deleted while the watch was down is gone.
  auto l = s.start_listing();
  l.add_page(page({sized("b", "300")}, "300"), nullptr);
  EXPECT_EQ(names(s), (std::vector<std::string>{"a"}));  // until the list is finished
  s.finish_listing(std::move(l), "300");
  EXPECT_EQ(names(s), (std::vector<std::string>{"b"}));
  EXPECT_EQ(s.resource_version(), "300");
  EXPECT_EQ(s.counts().relists, 2u);
}

TEST(PodStore, TheEngineJudgesAtTheEventAndTheCycleOnlyNamesTheReason) {
  config::Config cfg;
  auto s = listed(&cfg, {plain("web", "10")}, "100");
  EXPECT_FALSE(s.any_assessed_missing());
  s.apply(event("ADDED", missed("bert-0", "101")));
  EXPECT_TRUE(s.any_assessed_missing());
  // Judged against a configuration made after the pod: before install.
  monitor::Judge j;
  j.cfg = &cfg;
  j.webhook.name = "shmguard-ml-system";
  j.webhook.created = "2026-12-06T11:00:00Z";
  auto pods = s.pods(&j);
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].protection.reason, monitor::Unprotected::kBeforeInstall);
  EXPECT_GT(pods[0].protection.need, 0u);
  EXPECT_TRUE(pods[0].volume.empty());
  // The same kept pod against a namespaceSelector that leaves ml out: no engine run needed.
  j.webhook.namespace_selector = {{"matchLabels", {{"team", "other"}}}};
  EXPECT_EQ(s.pods(&j)[0].protection.reason, monitor::Unprotected::kNamespaceNotSelected);
  // Without a judge the monitor reports only pods with a /dev/shm.
  EXPECT_TRUE(s.pods(nullptr).empty());
  // Recreated with shmguard's volume (the webhook's patch): protected, no longer counted.
  json fixed = missed("bert-0", "102");
  fixed = fixed.patch(inject::inject_pod(fixed, cfg).patch);
  s.apply(event("MODIFIED", fixed));
  EXPECT_FALSE(s.any_assessed_missing());
  pods = s.pods(&j);
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].protection.reason, monitor::Unprotected::kNo);
  s.apply(event("MODIFIED", missed("bert-0", "103")));
  EXPECT_TRUE(s.any_assessed_missing());
  s.apply(event("DELETED", missed("bert-0", "104")));
  EXPECT_FALSE(s.any_assessed_missing());
}

TEST(PodStore, KeepsNoJsonOfAProtectedPod) {
  config::Config cfg;
  auto s = listed(&cfg, {sized("a", "10")}, "100");
  const auto kept = s.kept();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_TRUE(kept[0].assessment.labels.is_null());  // labels are kept only for a missed pod's objectSelector
  EXPECT_EQ(kept[0].pod.name, "a");
}

TEST(PodStore, TheFilteredParseOfAnEventKeepsWhatTheEngineReads) {
  const json e = event("ADDED", sized("a", "10"));
  const json parsed = monitor::parse_pod_list(e.dump());
  EXPECT_EQ(parsed["type"], "ADDED");
  EXPECT_FALSE(parsed["object"]["metadata"].contains("managedFields"));
  EXPECT_TRUE(parsed["object"]["spec"]["containers"][0].contains("env"));
  PodStore s(nullptr);
  EXPECT_EQ(s.apply(parsed), WatchStep::kContinue);
  EXPECT_EQ(names(s), (std::vector<std::string>{"a"}));
}
