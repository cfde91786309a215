// Golden tests: tests/golden/<case>.yaml pods in, <case>.golden.yaml out. Every case runs through
// the offline path (what `shmguard mutate` prints) and the webhook path (AdmissionReview ->
// base64 JSON patch -> applied to the input), and both must produce the golden pod.
// REFRESH_GOLDEN=1 rewrites the golden files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "admission/review.h"
#include "config/config.h"
#include "inject/inject.h"
#include "manifests/offline.h"
#include "manifests/templates.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace shmguard;
using nlohmann::json;

namespace {

const fs::path kDir = SHMGUARD_GOLDEN_DIR;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> cases() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir)) {
    auto name = e.path().filename().string();
    if (!ends_with(name, ".yaml") || ends_with(name, ".golden.yaml") || ends_with(name, ".config.yaml")) continue;
    out.push_back(name.substr(0, name.size() - 5));
  }
  std::sort(out.begin(), out.end());
  return out;
}

config::Config config_for(const std::string& name) {
  auto path = kDir / (name + ".config.yaml");
  if (!fs::exists(path)) return {};
  auto r = config::load_config_file(path.string());
  if (!r.ok()) throw std::runtime_error(r.error());
  return (*r);
}

// What `shmguard mutate` makes of `input`: the output and the runner with its reports.
struct Offline {
  std::ostringstream out;
  manifests::OfflineRunner runner;
  Offline(const config::Config& cfg, const std::string& name, const std::string& input)
      : runner(cfg, manifests::OutputFormat::kYaml, out) {
    std::istringstream in(input);
    auto done = runner.process(name + ".yaml", in);
    EXPECT_TRUE(done.ok()) << done.error();
    runner.finish();
  }
};

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, OfflineAndWebhookAgreeWithGolden) {
  const std::string name = GetParam();
  const auto cfg = config_for(name);
  const std::string input = test::read_file(kDir / (name + ".yaml"));

  // Offline path.
  Offline offline(cfg, name, input);
  const auto& runner = offline.runner;
  const auto& out = offline.out;
  ASSERT_EQ(runner.reports().size(), 1u) << "a golden case holds exactly one pod";
  const auto& report = runner.reports()[0];

  std::string actual = "# decision: " + report.summary_done() + "\n# because: " + report.result.because + "\n";
  for (const auto& w : report.result.warnings) actual += "# warning: " + w.text + "\n";
  if (report.result.sizing) actual += "# sizing: " + report.result.sizing->explanation + "\n";
  actual += out.str();

  const auto golden_path = kDir / (name + ".golden.yaml");
  if (std::getenv("REFRESH_GOLDEN")) {
    test::write_file(golden_path, actual);
  }
  ASSERT_TRUE(fs::exists(golden_path)) << "missing " << golden_path << " (run with REFRESH_GOLDEN=1)";
  EXPECT_EQ(test::read_file(golden_path), actual) << "golden differs; REFRESH_GOLDEN=1 rewrites it";

  // Webhook path on the same pod.
  const json pod = test::yaml_documents(input).at(0);
  auto outcome = admission::handle_review(test::admission_review("admission.k8s.io/v1", pod).dump(), cfg);
  ASSERT_NE(outcome.decision, admission::Decision::kRejected) << outcome.error;
  const json response = json::parse(outcome.body)["response"];
  EXPECT_EQ(response["allowed"], true);
  json expected_warnings = json::array();
  for (const auto& w : report.result.warnings) expected_warnings.push_back(admission::sanitize_warning(w.text));
  EXPECT_EQ(response.value("warnings", json::array()), expected_warnings);

  const json offline_pod = test::yaml_documents(out.str()).at(0);
  if (report.result.mutated()) {
    ASSERT_TRUE(response.contains("patch"));
    EXPECT_EQ(response["patchType"], "JSONPatch");
    const json patch = json::parse(test::base64_decode(response["patch"]));
    const json webhook_pod = pod.patch(patch);
    EXPECT_EQ(webhook_pod, offline_pod) << "offline and webhook paths disagree";
    // The patch equals what nlohmann's diff finds between the input and the result.
    auto direct = inject::inject_pod(pod, cfg);
    EXPECT_EQ(pod.patch(json::diff(pod, webhook_pod)), pod.patch(direct.patch));
    // Idempotent: a second admission of the result changes nothing.
    auto again = admission::handle_review(test::admission_review("admission.k8s.io/v1", webhook_pod).dump(), cfg);
    EXPECT_FALSE(json::parse(again.body)["response"].contains("patch"));
  } else {
    EXPECT_FALSE(response.contains("patch"));
    EXPECT_EQ(out.str(), input) << "an unchanged document must come out byte-for-byte";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string n = param.param;
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return n;
                         });

// Owner goldens (tests/golden/owners/): workloads whose owner says how many processes each pod
// starts (PyTorchJob nprocPerNode, a runtime's numProcPerNode). Offline reads the owner's field;
// the webhook sees the pod the operator creates, with PET_NPROC_PER_NODE set from it. Every
// template must get the same size both ways.
std::vector<std::string> owner_cases() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir / "owners")) {
    auto name = e.path().filename().string();
    if (ends_with(name, ".yaml") && !ends_with(name, ".golden.yaml")) out.push_back(name.substr(0, name.size() - 5));
  }
  std::sort(out.begin(), out.end());
  return out;
}

class OwnerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(OwnerGolden, OfflineReadsTheOwnerAndTheWebhookAgrees) {
  const std::string name = GetParam();
  const config::Config cfg;
  const std::string input = test::read_file(kDir / "owners" / (name + ".yaml"));
  Offline offline(cfg, name, input);
  const auto& runner = offline.runner;
  const auto& out = offline.out;
  std::string actual;
  for (const auto& r : runner.reports()) {
    actual += "# " + r.ref.display_path() + ": " + r.summary_done() + "\n";
    for (const auto& w : r.result.warnings) actual += "#   warning: " + w.text + "\n";
    if (r.result.sizing) actual += "#   sizing: " + r.result.sizing->explanation + "\n";
  }
  actual += out.str();
  const auto golden_path = kDir / "owners" / (name + ".golden.yaml");
  if (std::getenv("REFRESH_GOLDEN")) test::write_file(golden_path, actual);
  ASSERT_TRUE(fs::exists(golden_path)) << "missing " << golden_path << " (run with REFRESH_GOLDEN=1)";
  EXPECT_EQ(test::read_file(golden_path), actual) << "golden differs; REFRESH_GOLDEN=1 rewrites it";

  // Every document's templates, each as its operator makes the pod (an Argo template with its
  // workflow's volumes, a TrainJob with its runtime: what the report's ref carries).
  const auto docs = test::yaml_documents(input);
  std::size_t found = 0;
  for (std::size_t d = 0; d < docs.size(); ++d) found += test::templates_of(docs[d]).size();
  ASSERT_EQ(found, runner.reports().size());
  for (const auto& rep : runner.reports()) {
    const auto& ref = rep.ref;
    const json& doc = docs.at(static_cast<std::size_t>(rep.document - 1));
    const json pod = manifests::operator_pod(doc.at(json::json_pointer(ref.pointer)), ref);
    auto outcome = admission::handle_review(test::admission_review("admission.k8s.io/v1", pod).dump(), cfg);
    const json response = json::parse(outcome.body)["response"];
    ASSERT_EQ(response.contains("patch"), rep.result.mutated()) << ref.path;
    if (!rep.result.mutated()) continue;
    const json webhook_pod = pod.patch(json::parse(test::base64_decode(response["patch"])));
    EXPECT_EQ(webhook_pod["metadata"]["annotations"]["shmguard.io/injected-size"],
              sizing::format_quantity(rep.result.size()))
        << ref.path << ": the webhook sized the operator's pod differently";
    const std::string webhook_sizing = webhook_pod["metadata"]["annotations"]["shmguard.io/sizing"];
    EXPECT_EQ(ref.owner_procs ? test::sizing_as_offline(webhook_sizing, ref.owner_procs->field) : webhook_sizing,
              rep.result.sizing->explanation)
        << ref.path << ": the webhook explained the operator's pod's size differently";
  }
}

INSTANTIATE_TEST_SUITE_P(Owners, OwnerGolden, ::testing::ValuesIn(owner_cases()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string n = param.param;
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return n;
                         });

TEST(GoldenSuite, EveryGoldenHasAnInput) {
  for (const auto& e : fs::directory_iterator(kDir)) {
    auto name = e.path().filename().string();
    if (ends_with(name, ".golden.yaml")) {
      auto input = kDir / (name.substr(0, name.size() - 12) + ".yaml");
      EXPECT_TRUE(fs::exists(input)) << name << " has no input " << input;
    }
    if (ends_with(name, ".config.yaml")) {
      auto input = kDir / (name.substr(0, name.size() - 12) + ".yaml");
      EXPECT_TRUE(fs::exists(input)) << name << " configures no case";
    }
  }
}

TEST(GoldenSuite, CoversAtLeast25Cases) { EXPECT_GE(cases().size(), 25u); }

}  // namespace
