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

TEST(Tracker, TheExpositionReadsBackWithItsLabelsUnescaped) {
  monitor::Tracker t;
  t.update({pod("a", 500)}, {{"n1", true, ""}, {"n2", false, "timeout"}}, 100);
  const auto samples = monitor::parse_exposition(t.exposition(103));
  std::vector<std::string> names;
  for (const auto& s : samples) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"shmguard_shm_used_bytes", "shmguard_shm_size_bytes", "shmguard_shm_peak_bytes",
                                             "shmguard_node_scrape_errors_total", "shmguard_node_scrape_errors_total",
                                             "shmguard_node_last_good_scrape_age_seconds", "shmguard_monitor_cycles_total"}));
  EXPECT_EQ(samples[0].labels.at("owner_name"), "j\"ob\\\n");
  EXPECT_EQ(samples[0].labels.at("pod"), "a");
  EXPECT_EQ(samples[0].value, 500);
  EXPECT_EQ(samples[4].labels.at("node"), "n2");
  EXPECT_EQ(samples[4].value, 1);
  EXPECT_DOUBLE_EQ(samples[5].value, 3.0);
  EXPECT_TRUE(samples[6].labels.empty());
  EXPECT_EQ(samples[6].value, 1);
}

TEST(Tracker, LinesThatAreNotSamplesAreSkipped) {
  const auto samples = monitor::parse_exposition("# HELP x y\nbroken{a=\"1\" 3\nno_value\nok{a=\"1\",} 2\n\nbare 4.5");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].name, "ok");
  EXPECT_EQ(samples[0].labels.at("a"), "1");
  EXPECT_EQ(samples[1].name, "bare");
  EXPECT_DOUBLE_EQ(samples[1].value, 4.5);
}

namespace {

// A pod with shmguard's volume whose container `train` restarted `restarts` times, the last ending
// at `finished`; the kubelet's figures taken at `stats_time` with `du` bytes of files.
monitor::PodShm restarted(std::uint64_t restarts, const std::string& finished, const std::string& stats_time,
                          std::uint64_t du, bool figures = true) {
  monitor::PodShm p;
  p.namespace_name = "ml";
  p.name = "crashy";
  p.uid = "uid-crashy";
  p.volume = "shmguard-dshm";
  p.restarts = restarts;
  p.restarted_container = "train";
  p.restart_finished = finished;
  p.restart_exit_code = 139;
  if (figures) {
    p.capacity = 1ULL << 30;
    p.used = du + (5ULL << 20);
    p.du_bytes = du;
    p.stats_time = stats_time;
  }
  return p;
}

}  // namespace

TEST(Tracker, ARestartWhoseFilesStayedIsALeftoverOncePerRestart) {
  monitor::Tracker t;
  t.update({restarted(0, "", "2026-12-06T10:00:00Z", 0)}, {}, 0);
  EXPECT_TRUE(t.newly_leftover().empty());
  EXPECT_EQ(t.exposition(0).find("shmguard_shm_leftover_bytes{"), std::string::npos);  // never restarted
  // It crashed at 10:01:10; the kubelet's figures are from before: not yet judged.
  t.update({restarted(1, "2026-12-06T10:01:10Z", "2026-12-06T10:01:00Z", 0)}, {}, 30);
  EXPECT_TRUE(t.newly_leftover().empty());
  // A cycle whose node did not answer: still waiting.
  t.update({restarted(1, "2026-12-06T10:01:10Z", "", 0, false)}, {}, 60);
  EXPECT_TRUE(t.newly_leftover().empty());
  // The first figures after it: 200Mi of files the dead process left.
  t.update({restarted(1, "2026-12-06T10:01:10Z", "2026-12-06T10:02:00Z", 200ULL << 20)}, {}, 90);
  ASSERT_EQ(t.newly_leftover().size(), 1u);
  EXPECT_EQ(t.newly_leftover()[0].du_bytes, 200ULL << 20);
  EXPECT_NE(t.exposition(90).find("shmguard_shm_leftover_bytes{namespace=\"ml\",pod=\"crashy\",owner_kind=\"\","
                                  "owner_name=\"\"} 209715200\n"), std::string::npos);
  t.update({restarted(1, "2026-12-06T10:01:10Z", "2026-12-06T10:03:00Z", 200ULL << 20)}, {}, 120);
  EXPECT_TRUE(t.newly_leftover().empty());  // the same restart: told once
  // The next restart with /dev/shm back near zero (a live DataLoader's unlinked segments read 0 in du).
  t.update({restarted(2, "2026-12-06T10:05:00Z", "2026-12-06T10:06:00Z", 512ULL << 10)}, {}, 150);
  EXPECT_TRUE(t.newly_leftover().empty());
  EXPECT_NE(t.exposition(150).find("pod=\"crashy\",owner_kind=\"\",owner_name=\"\"} 524288\n"), std::string::npos);
}

TEST(Tracker, APodFirstSeenAfterARestartIsJudgedToo) {
  monitor::Tracker t;  // the monitor started after the crash
  t.update({restarted(3, "2026-12-06T10:01:10Z", "2026-12-06T10:02:00Z", 300ULL << 20)}, {}, 0);
  EXPECT_EQ(t.newly_leftover().size(), 1u);
  EXPECT_FALSE(monitor::leftover_worth_telling(1ULL << 20, 200ULL << 30));  // under 1% of 200Gi
  EXPECT_TRUE(monitor::leftover_worth_telling(1ULL << 20, 64ULL << 20));
  EXPECT_FALSE(monitor::leftover_worth_telling((1ULL << 20) - 1, 64ULL << 20));
}

TEST(Tracker, APodThatLeftAndCameBackStartsAfreshAndTheOthersKeepTheirs) {
  // update() works on the kept pods in place: a pod missing from a cycle loses its series, its
  // peak and its Event, and the pods beside it keep theirs.
  monitor::Tracker t;
  t.update({pod("a", 950), pod("b", 600)}, {{"n1", true, ""}}, 100);
  EXPECT_EQ(t.newly_full().size(), 1u);
  t.update({pod("b", 100)}, {{"n1", true, ""}}, 130);
  EXPECT_EQ(t.pods(), 1u);
  t.update({pod("a", 100), pod("b", 100), pod("b", 990)}, {{"n1", true, ""}}, 160);  // b twice: its first record
  const std::string text = t.exposition(160);
  EXPECT_NE(text.find(R"(shmguard_shm_peak_bytes{namespace="ml",pod="a",owner_kind="Job",owner_name="j\"ob\\\n"} 100)" "\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find(R"(shmguard_shm_peak_bytes{namespace="ml",pod="b",owner_kind="Job",owner_name="j\"ob\\\n"} 600)" "\n"),
            std::string::npos) << text;
  EXPECT_TRUE(t.newly_full().empty());
  t.update({pod("a", 960)}, {{"n1", true, ""}}, 190);
  ASSERT_EQ(t.newly_full().size(), 1u);  // warned again: it left in between
  EXPECT_EQ(t.newly_full()[0].name, "a");
  EXPECT_EQ(t.pods(), 1u);
}
