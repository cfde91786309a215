// /dev/shm use per pod from the pod list and the kubelet's Summary API.
#include "monitor/shm_usage.h"

#include <gtest/gtest.h>

using namespace shmguard;
using nlohmann::json;

namespace {

json pod(const std::string& name, const json& volume, const std::string& phase = "Running",
         const std::string& mount = "/dev/shm") {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name},
                        {"ownerReferences", {{{"kind", "Job"}, {"name", "job-" + name}, {"controller", true}}}}}},
          {"spec", {{"nodeName", "node-a"},
                    {"containers", {{{"name", "train"}, {"volumeMounts", {{{"name", "dshm"}, {"mountPath", mount}}}}}}},
                    {"volumes", {volume}}}},
          {"status", {{"phase", phase}}}};
}

const json kMemory = {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "2Gi"}}}};

// Measured on the test node (issue #28): a DataLoader of batch 64 x 1 MiB with 4 workers in a 2Gi
// Memory emptyDir. df said 604061696 bytes used, `du -sb` 40: PyTorch unlinks its segments.
json summary() {
  return {{"pods", {{{"podRef", {{"name", "p"}, {"namespace", "ml"}, {"uid", "uid-p"}}},
                     {"volume", {{{"name", "dshm"}, {"capacityBytes", 2147483648ULL}, {"availableBytes", 1543421952ULL},
                                  {"usedBytes", 0}}}}}}}};
}

}  // namespace

TEST(ShmUsage, UsedIsCapacityMinusAvailableNeverTheKubeletsUsedBytes) {
  auto pods = monitor::shm_pods({{"items", {pod("p", kMemory)}}});
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].size_limit, 2ULL << 30);
  EXPECT_FALSE(pods[0].capacity);
  EXPECT_EQ(monitor::verdict(pods[0], {}), monitor::UsageVerdict::kUnknown);
  EXPECT_EQ(monitor::apply_summary(pods, "node-a", summary()), 1u);
  EXPECT_EQ(pods[0].capacity, 2147483648ULL);
  EXPECT_EQ(pods[0].used, 604061696ULL);
  EXPECT_EQ(pods[0].du_bytes, 0u);
  EXPECT_EQ(pods[0].peak, 604061696ULL);
  EXPECT_EQ(monitor::verdict(pods[0], {}), monitor::UsageVerdict::kOk);
  EXPECT_FALSE(monitor::suggestion(pods[0], {}));
}

TEST(ShmUsage, OnlyRunningPodsWithAMemoryEmptyDirAtDevShm) {
  const json disk = {{"name", "dshm"}, {"emptyDir", json::object()}};
  const json host = {{"name", "dshm"}, {"hostPath", {{"path", "/dev/shm"}}}};
  auto pods = monitor::shm_pods({{"items", {pod("a", kMemory), pod("b", disk), pod("c", host), pod("d", kMemory, "Pending"),
                                            pod("e", kMemory, "Running", "/scratch"), json("junk"), json::object()}}});
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].name, "a");
  EXPECT_EQ(pods[0].owner_kind, "Job");
  EXPECT_EQ(pods[0].owner_name, "job-a");
}

TEST(ShmUsage, AJobSetsPodsAreOwnedByTheJobSet) {
  json p = pod("w", kMemory);
  p["metadata"]["labels"] = {{"jobset.sigs.k8s.io/jobset-name", "pytorch"}};
  auto pods = monitor::shm_pods({{"items", {p}}});
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].owner_kind, "JobSet");
  EXPECT_EQ(pods[0].owner_name, "pytorch");
}

TEST(ShmUsage, ASummaryFromAnotherNodeOrForAnotherPodIsNotUsed) {
  auto pods = monitor::shm_pods({{"items", {pod("p", kMemory)}}});
  EXPECT_EQ(monitor::apply_summary(pods, "node-b", summary()), 0u);
  json other = summary();
  other["pods"][0]["podRef"]["uid"] = "uid-other";
  EXPECT_EQ(monitor::apply_summary(pods, "node-a", other), 0u);
  EXPECT_EQ(monitor::apply_summary(pods, "node-a", json("not a summary")), 0u);
  EXPECT_FALSE(pods[0].used);
}

TEST(ShmUsage, NearlyFullAndOversizedGetTheSizeThePeakNeeds) {
  monitor::PodShm p;
  p.capacity = 2ULL << 30;
  p.used = p.capacity.value() / 100 * 95;
  p.peak = *p.used;
  EXPECT_EQ(monitor::verdict(p, {}), monitor::UsageVerdict::kNearlyFull);
  EXPECT_EQ(monitor::suggestion(p, {}), sizing::size_for_peak(p.peak, {}));
  EXPECT_GT(*monitor::suggestion(p, {}), *p.capacity);

  p.capacity = 64ULL << 30;  // 64Gi mounted, 300Mi used at most: needs 450Mi -> the 1Gi min
  p.used = 100ULL << 20;
  p.peak = 300ULL << 20;
  EXPECT_EQ(monitor::verdict(p, {}), monitor::UsageVerdict::kOversized);
  EXPECT_EQ(monitor::suggestion(p, {}), 1ULL << 30);

  p.capacity = 2ULL << 30;  // a peak of 300Mi in 2Gi: within 4x of what it needs
  EXPECT_EQ(monitor::verdict(p, {}), monitor::UsageVerdict::kOk);
}

// A node as the API server lists it: the kubelet's address and port from status; the images and
// conditions that make a node's status tens of KB are dropped by the filtered parse.
TEST(ShmUsage, EachNodesKubeletIsItsInternalIPAndDaemonEndpointPort) {
  const json list = {
      {"metadata", {{"continue", "tok"}}},
      {"items",
       {{{"metadata", {{"name", "gpu-1"}}},
         {"status", {{"addresses", {{{"type", "Hostname"}, {"address", "gpu-1"}}, {{"type", "InternalIP"}, {"address", "10.0.3.7"}}}},
                     {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
                     {"images", {{{"names", {"ghcr.io/x/y:1"}}, {"sizeBytes", 1}}}}}}},
        {{"metadata", {{"name", "edge"}}},
         {"status", {{"addresses", {{{"type", "ExternalIP"}, {"address", "203.0.113.9"}}, {{"type", "Hostname"}, {"address", "edge.lan"}}}},
                     {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 70000}}}}}}}},
        {{"metadata", {{"name", "no-address"}}}, {"status", {{"addresses", json::array()}}}},
        {{"metadata", {{"name", "custom-port"}}},
         {"status", {{"addresses", {{{"type", "InternalIP"}, {"address", "10.0.3.8"}}}},
                     {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 11250}}}}}}}}}}};
  const json parsed = monitor::parse_node_list(list.dump());
  EXPECT_EQ(parsed["metadata"]["continue"], "tok");
  EXPECT_FALSE(parsed["items"][0]["status"].contains("images"));
  const auto k = monitor::kubelet_addresses(parsed);
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0].node, "gpu-1");
  EXPECT_EQ(k[0].address, "10.0.3.7");
  EXPECT_EQ(k[0].port, 10250);
  EXPECT_EQ(k[1].address, "edge.lan");  // Hostname before ExternalIP; a port out of range is the default
  EXPECT_EQ(k[1].port, 10250);
  EXPECT_EQ(k[2].port, 11250);
  EXPECT_TRUE(monitor::parse_node_list("{").is_null());
}

TEST(ShmUsage, APodListPageKeepsItsContinueToken) {
  json list = {{"metadata", {{"continue", "next-page"}, {"resourceVersion", "9"}}}, {"items", {pod("p", kMemory)}}};
  list["items"][0]["metadata"]["managedFields"] = {{{"manager", "kubelet"}}};
  const json parsed = monitor::parse_pod_list(list.dump());
  EXPECT_EQ(parsed["metadata"]["continue"], "next-page");
  EXPECT_EQ(parsed["metadata"]["resourceVersion"], "9");
  EXPECT_FALSE(parsed["items"][0]["metadata"].contains("managedFields"));
  EXPECT_EQ(monitor::shm_pods(parsed).size(), 1u);
}

TEST(ShmUsage, RestartsAndTheLastEndFromTheContainerStatuses) {
  json p = pod("p", kMemory);
  p["status"]["containerStatuses"] = {
      {{"name", "sidecar"}, {"restartCount", 1},
       {"lastState", {{"terminated", {{"exitCode", 0}, {"finishedAt", "2026-12-06T09:00:00Z"}}}}}},
      {{"name", "train"}, {"restartCount", 2}, {"state", {{"running", {{"startedAt", "2026-12-06T10:01:20Z"}}}}},
       {"lastState", {{"terminated", {{"exitCode", 139}, {"finishedAt", "2026-12-06T10:01:10Z"}}}}}}};
  auto pods = monitor::shm_pods(monitor::parse_pod_list(json{{"items", {p}}}.dump()));
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].restarts, 3u);
  EXPECT_EQ(pods[0].restarted_container, "train");
  EXPECT_EQ(pods[0].restart_exit_code, 139);
  EXPECT_EQ(pods[0].restart_finished, "2026-12-06T10:01:10Z");
  json s = summary();
  s["pods"][0]["volume"][0]["time"] = "2026-12-06T10:02:00Z";
  s["pods"][0]["volume"][0]["usedBytes"] = 209715200;
  auto again = monitor::shm_pods({{"items", {pod("p", kMemory)}}});
  monitor::apply_summary(again, "node-a", monitor::parse_summary(s.dump()));
  EXPECT_EQ(again[0].stats_time, "2026-12-06T10:02:00Z");
  EXPECT_EQ(again[0].du_bytes, 209715200u);
}
