// The nodes' summaries joined into the pods (scrape/reads.h): one result per node, each failure
// with why, the others' figures still in.
#include "scrape/reads.h"

#include <gtest/gtest.h>

using namespace shmguard;
using nlohmann::json;

namespace {

json pod(const std::string& name, const std::string& node) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}}},
          {"spec", {{"nodeName", node},
                    {"containers", {{{"name", "train"}, {"volumeMounts", {{{"name", "dshm"}, {"mountPath", "/dev/shm"}}}}}}},
                    {"volumes", {{{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "2Gi"}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

std::string summary(const std::string& name) {
  return json{{"pods", {{{"podRef", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}}},
                         {"volume", {{{"name", "dshm"}, {"capacityBytes", 2147483648ULL}, {"availableBytes", 1073741824ULL},
                                      {"usedBytes", 0}}}}}}}}
      .dump();
}

}  // namespace

TEST(ReadSummaries, EachNodeFailsOnItsOwn) {
  auto pods = monitor::shm_pods({{"items", {pod("a", "node-a"), pod("b", "node-b"), pod("c", "node-c"), pod("d", "node-d")}}});
  ASSERT_EQ(pods.size(), 4u);
  const std::vector<kube::NodeTarget> nodes{{"node-a", std::nullopt}, {"node-b", std::nullopt}, {"node-c", std::nullopt},
                                            {"node-d", std::nullopt}};
  const scrape::SummaryReader read = [](const kube::NodeTarget& n) -> Result<std::string> {
    if (n.name == "node-a") return summary("a");
    if (n.name == "node-b") return Failure{"forbidden (the kubelet wants `get nodes/stats`)"};
    if (n.name == "node-c") return std::string("{not json");
    return summary("d");
  };
  const auto scrapes = scrape::read_summaries(read, nodes, pods, 3);
  ASSERT_EQ(scrapes.size(), 4u);
  EXPECT_TRUE(scrapes[0].ok);
  EXPECT_EQ(scrapes[1].node, "node-b");
  EXPECT_FALSE(scrapes[1].ok);
  EXPECT_EQ(scrapes[1].error, "forbidden (the kubelet wants `get nodes/stats`)");
  EXPECT_FALSE(scrapes[2].ok);
  EXPECT_EQ(scrapes[2].error, "the summary is not JSON");
  EXPECT_TRUE(scrapes[3].ok);
  EXPECT_EQ(pods[0].used, 1073741824ULL);
  EXPECT_FALSE(pods[1].used);
  EXPECT_FALSE(pods[2].used);
  EXPECT_EQ(pods[3].used, 1073741824ULL);
}

TEST(ReadSummaries, NoNodesNoReads) {
  std::vector<monitor::PodShm> pods;
  int reads = 0;
  EXPECT_TRUE(scrape::read_summaries([&](const kube::NodeTarget&) -> Result<std::string> { return ++reads, std::string(); },
                                     {}, pods, 4)
                  .empty());
  EXPECT_EQ(reads, 0);
}
