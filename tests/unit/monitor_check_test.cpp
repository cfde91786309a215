// `monitor --check` reading a monitor's metrics (scrape/monitor_check.h).
#include "scrape/monitor_check.h"

#include <gtest/gtest.h>

using namespace shmguard;

TEST(MonitorCheck, CyclesThePodsFiguresAndEachNodesHealth) {
  const std::string metrics =
      "# HELP shmguard_monitor_cycles_total Cycles.\n# TYPE shmguard_monitor_cycles_total counter\n"
      "shmguard_monitor_cycles_total 3\n"
      "shmguard_shm_size_bytes{namespace=\"ml\",pod=\"train-0\"} 1073741824\n"
      "shmguard_shm_used_bytes{namespace=\"ml\",pod=\"train-0\"} 536870912\n"
      "shmguard_shm_peak_bytes{namespace=\"ml\",pod=\"train-0\"} 805306368\n"
      "shmguard_shm_size_bytes{namespace=\"other\",pod=\"train-0\"} 1\n"
      "shmguard_node_scrape_errors_total{node=\"node-a\"} 0\n"
      "shmguard_node_last_good_scrape_age_seconds{node=\"node-a\"} 12\n"
      "shmguard_node_scrape_errors_total{node=\"node-b\"} 4\n";
  const auto seen = scrape::seen_in_metrics(metrics, "ml", "train-0");
  EXPECT_EQ(seen.cycles, 3);
  ASSERT_TRUE(seen.size && seen.used && seen.peak);
  EXPECT_EQ(seen.size->value, 1073741824.0);
  EXPECT_EQ(seen.used->value, 536870912.0);
  EXPECT_EQ(seen.peak->value, 805306368.0);
  ASSERT_EQ(seen.nodes.size(), 2u);
  EXPECT_EQ(seen.nodes.at("node-a"), (std::pair<double, double>{0, 12}));
  EXPECT_EQ(seen.nodes.at("node-b"), (std::pair<double, double>{4, -1})) << "never a good scrape";
  EXPECT_TRUE(seen.error.empty());
}

TEST(MonitorCheck, NoPodAskedAboutAndNoCycleYet) {
  const auto seen = scrape::seen_in_metrics("shmguard_shm_size_bytes{namespace=\"ml\",pod=\"p\"} 1\n", "", "");
  EXPECT_EQ(seen.cycles, -1);
  EXPECT_FALSE(seen.size);
  EXPECT_TRUE(seen.nodes.empty());
}
