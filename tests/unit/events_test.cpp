// The monitor's Events (scrape/events.h): the object the API server gets, and what each says.
#include "scrape/events.h"

#include <gtest/gtest.h>

using namespace shmguard;

namespace {

monitor::PodShm full_pod() {
  monitor::PodShm p;
  p.name = "train-0";
  p.namespace_name = "ml";
  p.uid = "uid-1";
  p.capacity = 1ULL << 30;
  p.used = 1000ULL << 20;
  p.peak = 1000ULL << 20;
  return p;
}

}  // namespace

TEST(Events, AWarningOnThePodFromTheMonitor) {
  const auto ev = scrape::event_for(full_pod(), "ShmNearlyFull", "it is full", "2026-12-07T11:00:00Z");
  EXPECT_EQ(ev["kind"], "Event");
  EXPECT_EQ(ev["metadata"]["generateName"], "train-0.shmguard-");
  EXPECT_EQ(ev["metadata"]["namespace"], "ml");
  EXPECT_EQ(ev["involvedObject"], (nlohmann::json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", "ml"},
                                                  {"name", "train-0"}, {"uid", "uid-1"}}));
  EXPECT_EQ(ev["reason"], "ShmNearlyFull");
  EXPECT_EQ(ev["message"], "it is full");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["source"]["component"], "shmguard-monitor");
  EXPECT_EQ(ev["firstTimestamp"], "2026-12-07T11:00:00Z");
  EXPECT_EQ(ev["lastTimestamp"], "2026-12-07T11:00:00Z");
  EXPECT_EQ(ev["count"], 1);
}

TEST(Events, NearlyFullSaysHowFullAndWhatToSet) {
  const config::Config cfg;
  const auto p = full_pod();
  const std::string m = scrape::nearly_full_message(p, cfg);
  EXPECT_TRUE(m.starts_with("/dev/shm is 97% full (1000Mi of 1Gi); a DataLoader that needs more dies with a bus error. "
                            "Suggested: shmguard.io/size: "))
      << m;
  EXPECT_NE(m.find(sizing::format_quantity(*monitor::suggestion(p, cfg.sizing))), std::string::npos) << m;
}

TEST(Events, LeftoverNamesTheContainerAndWhatItLeft) {
  auto p = full_pod();
  p.restarted_container = "train";
  p.restart_exit_code = 137;
  p.restart_finished = "2026-12-07T10:59:00Z";
  p.du_bytes = 512ULL << 20;
  const std::string m = scrape::leftover_message(p);
  EXPECT_TRUE(m.starts_with("container train restarted (exit code 137 at 2026-12-07T10:59:00Z) and its /dev/shm still "
                            "holds 512Mi of files (1000Mi in use of 1Gi)"))
      << m;
  p.restart_finished.clear();
  EXPECT_TRUE(scrape::leftover_message(p).starts_with("container train restarted (exit code 137) and"));
}
