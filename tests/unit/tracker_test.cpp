// The monitor's memory between scrapes and its Prometheus text.
#include "monitor/tracker.h"

#include <gtest/gtest.h>

using namespace shmguard;

namespace {

monitor::PodShm pod(const std::string& name, std::uint64_t used, std::uint64_t cap = 1000) {
  monitor::PodShm p;
  p.namespace_name = "ml";
  p.name = name;
  p.uid = "uid-" + name;
  p.owner_kind = "Job";
  p.owner_name = "j\"ob\\\n";  // escaped in the labels
  p.capacity = cap;
  p.used = used;
  p.peak = used;
  return p;
}

}  // namespace

TEST(Tracker, KeepsThePeakWhileThePodLivesAndDropsItsSeriesAfter) {
  monitor::Tracker t;
  t.update({pod("a", 500)}, {{"n1", true, ""}}, 100);
  t.update({pod("a", 200)}, {{"n1", true, ""}}, 130);
  const std::string text = t.exposition(140);
  const std::string labels = R"({namespace="ml",pod="a",owner_kind="Job",owner_name="j\"ob\\\n"})";
  EXPECT_NE(text.find("shmguard_shm_used_bytes" + labels + " 200\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shmguard_shm_peak_bytes" + labels + " 500\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shmguard_shm_size_bytes" + labels + " 1000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shmguard_node_last_good_scrape_age_seconds{node=\"n1\"} 10.000\n"), std::string::npos) << text;
  t.update({}, {{"n1", true, ""}}, 160);
  EXPECT_EQ(t.exposition(160).find("pod=\"a\""), std::string::npos);
  EXPECT_EQ(t.pods(), 0u);
}

TEST(Tracker, ANodeThatDoesNotAnswerKeepsTheLastFiguresAndCountsErrors) {
  monitor::Tracker t;
  t.update({pod("a", 300)}, {{"n1", true, ""}}, 0);
  monitor::PodShm unknown = pod("a", 0);
  unknown.capacity.reset();
  unknown.used.reset();
  unknown.peak = 0;
  t.update({unknown}, {{"n1", false, "timeout"}}, 30);
  t.update({unknown}, {{"n1", false, "timeout"}}, 60);
  const std::string text = t.exposition(60);
  EXPECT_NE(text.find("shmguard_shm_peak_bytes{namespace=\"ml\",pod=\"a\""), std::string::npos);
  EXPECT_NE(text.find(" 300\n"), std::string::npos);
  EXPECT_NE(text.find("shmguard_node_scrape_errors_total{node=\"n1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shmguard_node_last_good_scrape_age_seconds{node=\"n1\"} 60.000\n"), std::string::npos) << text;
}

TEST(Tracker, WarnsOncePerPodWhenItFirstReaches90Percent) {
  monitor::Tracker t;
  t.update({pod("a", 899), pod("b", 100)}, {}, 0);
  EXPECT_TRUE(t.newly_full().empty());
  t.update({pod("a", 900), pod("b", 100)}, {}, 1);
  ASSERT_EQ(t.newly_full().size(), 1u);
  EXPECT_EQ(t.newly_full()[0].name, "a");
  t.update({pod("a", 950), pod("b", 100)}, {}, 2);
  EXPECT_TRUE(t.newly_full().empty());
}

TEST(Tracker, LabelValuesAreEscaped) {
  EXPECT_EQ(monitor::label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}
