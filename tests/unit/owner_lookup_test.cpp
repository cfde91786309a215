// The webhook's JobSet lookup: what an answer means, the cache, and the metric.
#include "server/owner_lookup.h"

#include <gtest/gtest.h>

#include "server/metrics.h"

using namespace shmguard;
using namespace shmguard::server;
using nlohmann::json;

TEST(OwnerLookup, PathAndAnswers) {
  EXPECT_EQ(jobset_path("ml", "bert"), "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/bert");
  json js = {{"metadata", {{"annotations", {{"shmguard.io/batch-size", "32"}, {"team", "nlp"}}}}}};
  auto found = read_jobset_answer("ml", "bert", 200, js, "");
  EXPECT_EQ(found.result, "found");
  EXPECT_EQ(found.annotations, (json{{"shmguard.io/batch-size", "32"}}));
  EXPECT_EQ(found.from, "JobSet ml/bert");
  EXPECT_EQ(found.warning, "");
  EXPECT_EQ(read_jobset_answer("ml", "bert", 200, json{{"metadata", json::object()}}, "").result, "none");
  auto missing = read_jobset_answer("ml", "bert", 404, nullptr, "");
  EXPECT_EQ(missing.result, "not-found");
  EXPECT_EQ(missing.warning,
            "shmguard: could not read JobSet ml/bert for its shmguard.io/ annotations (not found); sized from the pod's own facts");
  auto denied = read_jobset_answer("ml", "bert", 403, nullptr, "");
  EXPECT_EQ(denied.result, "forbidden");
  EXPECT_NE(denied.warning.find("needs get on jobsets.jobset.x-k8s.io"), std::string::npos);
  auto down = read_jobset_answer("ml", "bert", 0, nullptr, "cannot reach 10.0.0.1:443: Read timeout");
  EXPECT_EQ(down.result, "error");
  EXPECT_NE(down.warning.find("Read timeout"), std::string::npos);
  EXPECT_TRUE(down.annotations.empty());
}

TEST(OwnerLookup, CachesAnswersAndFailuresForTheirTimes) {
  int gets = 0;
  int status = 200;
  long timeout_seen = 0;
  std::string path_seen;
  OwnerLookup owners([] { return Result<kube::Access>(kube::Access{}); },
                     [&](const kube::Access&, const std::string& path, long timeout_ms) -> Result<kube::Response> {
                       ++gets;
                       path_seen = path;
                       timeout_seen = timeout_ms;
                       kube::Response r;
                       r.status = status;
                       r.body = json{{"metadata", {{"annotations", {{"shmguard.io/procs-per-pod", "2"}}}}}};
                       return r;
                     });
  auto t = OwnerLookup::Clock::now();
  owners.set_clock([&] { return t; });
  config::OwnerLookupConfig cfg;
  cfg.timeout_ms = 250;
  cfg.cache_seconds = 30;
  auto first = owners.lookup("ml", "bert", cfg);
  EXPECT_FALSE(first.cached);
  EXPECT_EQ(first.result, "found");
  EXPECT_EQ(timeout_seen, 250);
  EXPECT_EQ(path_seen, "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/bert");
  auto again = owners.lookup("ml", "bert", cfg);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.annotations, first.annotations);
  EXPECT_EQ(gets, 1);
  owners.lookup("other", "bert", cfg);  // another namespace: another JobSet
  EXPECT_EQ(gets, 2);
  t += std::chrono::seconds(31);
  status = 500;
  auto failed = owners.lookup("ml", "bert", cfg);
  EXPECT_EQ(gets, 3);
  EXPECT_EQ(failed.result, "error");
  t += std::chrono::seconds(4);  // a failure is kept 5 s: a JobSet's pods do not each wait it out
  EXPECT_TRUE(owners.lookup("ml", "bert", cfg).cached);
  EXPECT_EQ(gets, 3);
  t += std::chrono::seconds(2);
  status = 200;
  EXPECT_EQ(owners.lookup("ml", "bert", cfg).result, "found");
  EXPECT_EQ(gets, 4);
}

TEST(OwnerLookup, NoAccessIsAnError) {
  OwnerLookup owners([] { return Result<kube::Access>(Failure{"no token"}); },
                     [](const kube::Access&, const std::string&, long) -> Result<kube::Response> {
                       ADD_FAILURE() << "no GET without access";
                       return Failure{"unreachable"};
                     });
  auto a = owners.lookup("ml", "bert", config::OwnerLookupConfig{});
  EXPECT_EQ(a.result, "error");
  EXPECT_NE(a.warning.find("no token"), std::string::npos);
}

TEST(OwnerLookup, CountedInTheMetrics) {
  Metrics m;
  m.owner_lookup("found", false);
  m.owner_lookup("found", true);
  m.owner_lookup("found", true);
  m.owner_lookup("error", false);
  auto text = m.render();
  EXPECT_NE(text.find("# TYPE shmguard_owner_lookups_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("shmguard_owner_lookups_total{result=\"found\",source=\"api\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("shmguard_owner_lookups_total{result=\"found\",source=\"cache\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("shmguard_owner_lookups_total{result=\"error\",source=\"api\"} 1\n"), std::string::npos);
}
