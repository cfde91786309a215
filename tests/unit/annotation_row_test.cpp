// One table of annotations: a row added to it and nowhere else (this test's build of the inject
// module adds `shmguard.io/test-row`, a count that sizes, through SHMGUARD_TEST_ANNOTATION_ROWS)
// is read and checked, makes a pod a training pod, is not "unknown", gets "did you mean" for its
// typos and is listed by --help. The webhook and `check` reach it through inject_pod, which both call.
#include <gtest/gtest.h>

#include "inject/annotations.h"
#include "inject/inject.h"
#include "inject/recognize.h"

using namespace shmguard;
using namespace shmguard::inject;
using nlohmann::json;

namespace {
config::Config cfg;
constexpr const char* kRow = "shmguard.io/test-row";

json pod_with(const json& annotations) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"annotations", annotations}}},
          {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "example/app:1"}}})}}}};
}

bool any_warning_has(const InjectResult& r, const std::string& text) {
  for (const auto& w : r.warnings)
    if (w.text.find(text) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST(AnnotationRow, TheTestRowIsInTheTable) {
  const AnnotationSpec* row = find_annotation(kRow);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->kind, AnnotationKind::kCount);
}

TEST(AnnotationRow, AloneItMakesATrainingPodAndIsNotUnknown) {
  auto r = inject_pod(pod_with({{kRow, "3"}}), cfg);
  EXPECT_TRUE(r.mutated()) << r.summary;  // rule 3: a sizing annotation
  EXPECT_FALSE(any_warning_has(r, "unknown annotation")) << r.warnings.size();
  auto plain = inject_pod(pod_with({{"example.com/other", "3"}}), cfg);
  EXPECT_FALSE(plain.mutated());  // the same pod without it is left alone
}

TEST(AnnotationRow, ABadValueIsWarnedAboutByNameAndIgnored) {
  for (const char* bad : {"three", "0", "-1"}) {
    auto r = inject_pod(pod_with({{kRow, bad}}), cfg);
    EXPECT_TRUE(any_warning_has(r, std::string(kRow) + " \"" + bad + "\"")) << bad;
    EXPECT_TRUE(any_warning_has(r, "; ignored")) << bad;
    EXPECT_TRUE(std::any_of(r.warnings.begin(), r.warnings.end(), [](const auto& w) { return w.about == kRow; })) << bad;
    const std::string sizing = r.patch.dump();
    EXPECT_NE(sizing.find(std::string("test-row \\\"") + bad), std::string::npos) << sizing;  // listed as ignored
  }
  auto good = inject_pod(pod_with({{kRow, "3"}}), cfg);
  EXPECT_FALSE(any_warning_has(good, kRow));
}

TEST(AnnotationRow, TyposOfItAreCaughtAndHelpListsIt) {
  EXPECT_EQ(closest_known_key("shmguard.io/testrow"), kRow);
  auto r = inject_pod(pod_with({{"shmguard.io/test-rows", "3"}, {"shmguard.io/batch-size", "8"}}), cfg);
  EXPECT_TRUE(any_warning_has(r, "did you mean shmguard.io/test-row?"));
  EXPECT_NE(annotation_help().find(std::string("  ") + kRow), std::string::npos) << annotation_help();
}
