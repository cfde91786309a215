// What an admission leaves in the metrics and the log (server/record.h), above all when the engine
// fails: the pod admitted with a warning (admission/response.h errored), counted as
// decision="error",reason="internal-error", and an error line that says what was thrown.
#include "server/record.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "../stderr_capture.h"
#include "../test_util.h"
#include "server/log.h"

using namespace shmguard;
using namespace shmguard::server;
using nlohmann::json;

namespace {

using test::stderr_of;

inject::InjectResult throws_std(const json&, const config::Config&, const inject::InjectOptions&) {
  throw std::runtime_error("engine broke");
}
inject::InjectResult throws_int(const json&, const config::Config&, const inject::InjectOptions&) { throw 42; }

std::string training_review() {
  json pod = json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"train-0",
    "labels":{"training.kubeflow.org/job-name":"j"}},
    "spec":{"containers":[{"name":"c","image":"pytorch/pytorch:2.4.0"}]}})");
  json r = test::admission_review("admission.k8s.io/v1", pod, "uid-1");
  r["request"]["namespace"] = "ml";
  return r.dump();
}

std::string line_of(const std::string& metrics, const std::string& series) {
  const auto at = metrics.find(series + " ");
  return at == std::string::npos ? "" : metrics.substr(at, metrics.find('\n', at) - at);
}

}  // namespace

TEST(Record, AnEngineThatThrowsIsAdmittedCountedAndLogged) {
  const config::Config cfg;
  Metrics metrics;
  const std::string series = R"(shmguard_admissions_total{decision="error",reason="internal-error"})";
  EXPECT_EQ(line_of(metrics.render(), series), "");
  int n = 0;
  for (admission::Engine engine : {&throws_std, &throws_int}) {
    std::string log = stderr_of([&] {
      auto out = admission::handle_review(training_review(), cfg, {}, engine);
      EXPECT_EQ(json::parse(out.body)["response"]["allowed"], true);
      EXPECT_EQ(json::parse(out.body)["response"]["warnings"].size(), 1u);
      record_admission(metrics, out, 0.001);
    });
    EXPECT_EQ(line_of(metrics.render(), series), series + " " + std::to_string(++n));
    json line = json::parse(log);
    EXPECT_EQ(line["level"], "error");
    EXPECT_EQ(line["msg"], "admission");
    EXPECT_EQ(line["decision"], "error");
    EXPECT_EQ(line["reason"], "internal-error");
    EXPECT_EQ(line["pod"], "train-0");
    EXPECT_EQ(line["error"], engine == &throws_std ? "engine broke" : "an exception that is not a std::exception");
    EXPECT_EQ(line["warnings"], json::array({"shmguard internal error; pod admitted without /dev/shm sizing"}));
  }
}

TEST(Record, EachReasonIsLoggedAtItsLevel) {
  const config::Config cfg;
  Metrics metrics;
  set_log_level(Level::kInfo);
  admission::AdmissionOutcome skipped;
  skipped.reason = Reason::kNotTraining;
  EXPECT_EQ(stderr_of([&] { record_admission(metrics, skipped, 0); }), "");  // debug
  std::string log = stderr_of([&] { record_admission(metrics, admission::handle_review(training_review(), cfg), 0); });
  EXPECT_EQ(json::parse(log)["level"], "info");
  EXPECT_EQ(json::parse(log)["reason"], "injected");
  log = stderr_of([&] { record_admission(metrics, admission::handle_review("[]", cfg), 0); });
  EXPECT_EQ(json::parse(log)["level"], "warn");
  EXPECT_EQ(json::parse(log)["decision"], "rejected");
  const std::string text = metrics.render();
  EXPECT_NE(text.find("shmguard_admissions_total{decision=\"skipped\",reason=\"not-training\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("shmguard_admissions_total{decision=\"injected\",reason=\"injected\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("shmguard_admissions_total{decision=\"rejected\",reason=\"bad-request\"} 1\n"), std::string::npos);
}

TEST(Record, ARefusalIsCountedWithoutALogLine) {
  Metrics metrics;
  EXPECT_EQ(stderr_of([&] {
              count_refusal(metrics, http_reason(413));
              count_refusal(metrics, Reason::kContentType);
            }),
            "");
  const std::string text = metrics.render();
  EXPECT_NE(text.find("shmguard_admissions_total{decision=\"rejected\",reason=\"http-413\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("shmguard_admissions_total{decision=\"rejected\",reason=\"content-type\"} 1\n"), std::string::npos);
}
