// Which kubelets a monitor cycle reads (scrape/kubelets.h): the node list read once and again after
// --node-refresh or for a pod on a node it does not name, a failed list, the DaemonSet agent's own
// kubelet, and only the nodes with a /dev/shm pod.
#include "scrape/kubelets.h"

#include <gtest/gtest.h>

using namespace shmguard;
using scrape::Kubelets;
using std::chrono::seconds;

namespace {

monitor::PodShm pod(const std::string& node, bool with_shm = true) {
  monitor::PodShm p;
  p.name = "p-" + node;
  p.node = node;
  if (with_shm) p.volume = "dshm";
  return p;
}

std::vector<std::string> names(const std::vector<kube::NodeTarget>& nodes) {
  std::vector<std::string> out;
  for (const auto& n : nodes) out.push_back(n.name);
  return out;
}

struct Lister {
  std::vector<std::string> nodes{"node-a", "node-b"};
  int calls = 0;
  bool fail = false;
  Kubelets::Lister fn() {
    return [this]() -> Result<std::vector<kube::NodeTarget>> {
      ++calls;
      if (fail) return Failure{"cannot list nodes: forbidden (needs `list nodes`)"};
      std::vector<kube::NodeTarget> out;
      for (const auto& n : nodes) out.push_back({n, kube::Access{}});
      return out;
    };
  }
};

}  // namespace

TEST(Kubelets, TheNodeListIsReadOnceThenAfterTheRefreshPeriod) {
  scrape::LoopOptions o;
  o.node_refresh_s = 300;
  Lister list;
  const kube::Access api;
  Kubelets k(api, o, "", list.fn());
  const auto t0 = Kubelets::Clock::now();
  auto r = k.for_pods({pod("node-a")}, t0);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(names(*r), (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_TRUE(k.for_pods({pod("node-b")}, t0 + seconds(299)));
  EXPECT_EQ(list.calls, 1);
  EXPECT_TRUE(k.for_pods({pod("node-a")}, t0 + seconds(301)));
  EXPECT_EQ(list.calls, 2);
  EXPECT_EQ(k.lists(), 2u);
}

TEST(Kubelets, APodOnANodeTheListDoesNotNameReadsItAgain) {
  scrape::LoopOptions o;
  Lister list;
  const kube::Access api;
  Kubelets k(api, o, "", list.fn());
  const auto t0 = Kubelets::Clock::now();
  ASSERT_TRUE(k.for_pods({pod("node-a")}, t0));
  list.nodes.push_back("node-c");
  // A pod without a /dev/shm on an unknown node, or one not scheduled yet, does not matter.
  ASSERT_TRUE(k.for_pods({pod("node-x", false), pod("")}, t0 + seconds(1)));
  EXPECT_EQ(list.calls, 1);
  auto r = k.for_pods({pod("node-c")}, t0 + seconds(2));
  ASSERT_TRUE(r);
  EXPECT_EQ(list.calls, 2);
  EXPECT_EQ(names(*r).back(), "node-c");
}

TEST(Kubelets, AFailedListIsTheCyclesFailureAndIsTriedAgain) {
  scrape::LoopOptions o;
  Lister list;
  list.fail = true;
  const kube::Access api;
  Kubelets k(api, o, "", list.fn());
  const auto t0 = Kubelets::Clock::now();
  EXPECT_EQ(k.for_pods({}, t0).error(), "cannot list nodes: forbidden (needs `list nodes`)");
  list.fail = false;
  EXPECT_TRUE(k.for_pods({}, t0 + seconds(1)));
  EXPECT_EQ(list.calls, 2);
  EXPECT_EQ(k.lists(), 1u);
}

TEST(Kubelets, TheAgentReadsItsOwnKubeletAtTheAddressItIsGiven) {
  scrape::LoopOptions o;
  o.node_name = "node-b";
  o.kubelet_address = "10.0.0.7";
  o.kubelet_port = 10255;
  Lister list;
  kube::Access api;
  api.ca_pem = "API CA";
  api.token = "t0ken";
  Kubelets k(api, o, "", list.fn());
  auto r = k.for_pods({pod("node-b")});
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "node-b");
  ASSERT_TRUE((*r)[0].kubelet);
  EXPECT_EQ((*r)[0].kubelet->host, "10.0.0.7");
  EXPECT_EQ((*r)[0].kubelet->port, 10255);
  EXPECT_EQ((*r)[0].kubelet->ca_pem, "API CA") << "no --kubelet-ca: the API server's";
  EXPECT_EQ((*r)[0].kubelet->token, "t0ken");
  EXPECT_EQ(list.calls, 0) << "the agent never lists nodes";
}

TEST(NodesWithShm, OnlyNodesThatRunAPodWithADevShmInTheListsOrder) {
  const std::vector<kube::NodeTarget> nodes{{"node-a", std::nullopt}, {"node-b", std::nullopt}, {"node-c", std::nullopt}};
  EXPECT_EQ(names(scrape::nodes_with_shm(nodes, {pod("node-c"), pod("node-b", false), pod("node-a"), pod("node-z")})),
            (std::vector<std::string>{"node-a", "node-c"}));
  EXPECT_TRUE(scrape::nodes_with_shm(nodes, {}).empty());
}
