// Recognition rules in README's order, image parsing and globbing.
#include "inject/recognize.h"
#include "base/text.h"

#include <gtest/gtest.h>

using namespace shmguard;
using namespace shmguard::inject;
using nlohmann::json;

namespace {
json pod(json labels, json annotations, std::string image = "busybox", bool host_ipc = false) {
  json p = {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", {{{"name", "c"}, {"image", image}}}}}}};
  if (!labels.is_null()) p["metadata"]["labels"] = labels;
  if (!annotations.is_null()) p["metadata"]["annotations"] = annotations;
  if (host_ipc) p["spec"]["hostIPC"] = true;
  return p;
}
config::SelectionConfig cfg;
}  // namespace

TEST(Recognize, OptOutWinsOverEverything) {
  auto r = recognize(pod({{"shmguard.io/inject", "false"}, {"training.kubeflow.org/job-name", "j"}},
                         {{"shmguard.io/batch-size", "32"}}, "pytorch/pytorch"),
                     cfg, true);
  EXPECT_EQ(r.verdict, Verdict::kOptedOut);
  EXPECT_EQ(recognize(pod(nullptr, {{"shmguard.io/inject", "False"}}, "pytorch/pytorch"), cfg).verdict,
            Verdict::kOptedOut);
}

TEST(Recognize, HostIpcBeatsOptIn) {
  auto r = recognize(pod({{"shmguard.io/inject", "true"}}, nullptr, "pytorch/pytorch", true), cfg);
  EXPECT_EQ(r.verdict, Verdict::kHostIPC);
}

TEST(Recognize, OptInAndSizingAnnotations) {
  EXPECT_EQ(recognize(pod({{"shmguard.io/inject", "true"}}, nullptr), cfg).verdict, Verdict::kTraining);
  EXPECT_EQ(recognize(pod(nullptr, {{"shmguard.io/inject", "true"}}), cfg).verdict, Verdict::kTraining);
  for (const char* key : {"shmguard.io/batch-size", "shmguard.io/num-workers", "shmguard.io/sample-size",
                          "shmguard.io/prefetch-factor", "shmguard.io/procs-per-pod", "shmguard.io/size"}) {
    auto r = recognize(pod(nullptr, {{key, "garbage"}}), cfg);
    EXPECT_EQ(r.verdict, Verdict::kTraining) << key;
    EXPECT_EQ(r.because, std::string("annotation ") + key);
  }
}

TEST(Recognize, LabelKeys) {
  for (const char* key : {"training.kubeflow.org/job-name", "training.kubeflow.org/replica-type"}) {
    auto r = recognize(pod({{key, "x"}}, nullptr), cfg);
    EXPECT_EQ(r.verdict, Verdict::kTraining) << key;
    EXPECT_EQ(r.because, std::string("label ") + key);
  }
  EXPECT_EQ(recognize(pod({{"app", "web"}}, nullptr), cfg).verdict, Verdict::kNotTraining);
}

TEST(Recognize, LabelKeyEqualsValue) {
  // Kubeflow Trainer's trainer step is a training pod; its initializer steps run no DataLoader.
  const char* step = "trainer.kubeflow.org/trainjob-ancestor-step";
  auto r = recognize(pod({{step, "trainer"}}, nullptr), cfg);
  EXPECT_EQ(r.verdict, Verdict::kTraining);
  EXPECT_EQ(r.because, "label trainer.kubeflow.org/trainjob-ancestor-step=trainer");
  for (const char* other : {"dataset-initializer", "model-initializer", "trainerx", ""})
    EXPECT_EQ(recognize(pod({{step, other}}, nullptr), cfg).verdict, Verdict::kNotTraining) << other;
  config::SelectionConfig custom;
  custom.label_keys = {"team=ml", "gpu"};
  EXPECT_EQ(recognize(pod({{"team", "ml"}}, nullptr), custom).verdict, Verdict::kTraining);
  EXPECT_EQ(recognize(pod({{"team", "web"}}, nullptr), custom).verdict, Verdict::kNotTraining);
  EXPECT_EQ(recognize(pod({{"gpu", "anything"}}, nullptr), custom).verdict, Verdict::kTraining);
}

TEST(Recognize, Images) {
  for (const char* img : {"pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", "nvcr.io/nvidia/pytorch:24.05-py3",
                          "registry.local:5000/ml/pytorch-train@sha256:0123abcd",
                          "registry.local:5000/ml/pytorch-train:1.0@sha256:0123abcd", "ghcr.io/org/my-pytorch"}) {
    EXPECT_EQ(recognize(pod(nullptr, nullptr, img), cfg).verdict, Verdict::kTraining) << img;
  }
  // "pytorch" only in the tag or the registry port does not count.
  for (const char* img : {"rayproject/ray-ml:2.9.0-pytorch", "nginx:1.25", "busybox@sha256:pytorch"}) {
    EXPECT_EQ(recognize(pod(nullptr, nullptr, img), cfg).verdict, Verdict::kNotTraining) << img;
  }
}

TEST(Recognize, InvalidInjectValueWarnsAndFallsThrough) {
  auto r = recognize(pod({{"shmguard.io/inject", "maybe"}}, nullptr, "pytorch/pytorch"), cfg);
  EXPECT_EQ(r.verdict, Verdict::kTraining);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].text.find("maybe"), std::string::npos);
}

TEST(Recognize, WrongTypesAreIgnoredNotFatal) {
  json p = {{"metadata", {{"labels", json::array({1, 2})}, {"annotations", "x"}}},
            {"spec", {{"containers", "nope"}, {"hostIPC", "yes"}}}};
  EXPECT_EQ(recognize(p, cfg).verdict, Verdict::kNotTraining);
  EXPECT_EQ(recognize(json(42), cfg).verdict, Verdict::kNotTraining);
  EXPECT_EQ(recognize(json::array(), cfg).verdict, Verdict::kNotTraining);
}

TEST(ImageRepository, StripsTagAndDigestKeepsPort) {
  EXPECT_EQ(image_repository("pytorch/pytorch:2.4.0"), "pytorch/pytorch");
  EXPECT_EQ(image_repository("reg:5000/a/b"), "reg:5000/a/b");
  EXPECT_EQ(image_repository("reg:5000/a/b:tag"), "reg:5000/a/b");
  EXPECT_EQ(image_repository("a/b@sha256:abc"), "a/b");
  EXPECT_EQ(image_repository("a/b:t@sha256:abc"), "a/b");
  EXPECT_EQ(image_repository("ubuntu"), "ubuntu");
}

TEST(Glob, Matches) {
  EXPECT_TRUE(glob_match("*pytorch*", "nvcr.io/nvidia/pytorch"));
  EXPECT_TRUE(glob_match("ghcr.io/acme/*", "ghcr.io/acme/x/y"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_FALSE(glob_match("a?c", "ac"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("*x", "abc"));
  // Pathological patterns stay linear-ish, no exponential backtracking.
  std::string text(20000, 'a');
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*b", text));
}

TEST(Printable, ReplacesControlCharactersAndTruncates) {
  EXPECT_EQ(printable("a\nb\x01"), "a?b?");
  EXPECT_EQ(printable(std::string(100, 'x')).size(), 43u);
}

TEST(Recognize, EveryTableKeyIsKnownAndEverySizingKeyMakesATrainingPod) {
  for (const auto& row : annotation_table()) {
    auto r = recognize(pod(nullptr, {{std::string(row.key), row.kind == AnnotationKind::kBool ? "true" : "1"}}), cfg);
    for (const auto& w : r.warnings) EXPECT_EQ(w.text.find("unknown annotation"), std::string::npos) << row.key;
    EXPECT_EQ(r.verdict == Verdict::kTraining, row.sizing || row.key == kInjectKey) << row.key;
    EXPECT_EQ(find_annotation(row.key), &row);
  }
  EXPECT_EQ(find_annotation("shmguard.io/batchsize"), nullptr);
  EXPECT_EQ(closest_known_key("shmguard.io/batchsize"), "shmguard.io/batch-size");
}

TEST(Duration, HelmAndKubectlForms) {
  EXPECT_EQ(parse_duration_s("2m"), 120);
  EXPECT_EQ(parse_duration_s("90s"), 90);
  EXPECT_EQ(parse_duration_s("90"), 90);
  EXPECT_EQ(parse_duration_s("1h30m"), 5400);
  EXPECT_EQ(parse_duration_s("1m30s"), 90);
  EXPECT_EQ(parse_duration_s("0s"), 0);
  EXPECT_EQ(parse_duration_s("24h"), 86400);
  for (const char* bad : {"", "m", "2 m", "1.5m", "2d", "1m30", "-5s", "25h", "99999999999999999999s", "s5"})
    EXPECT_EQ(parse_duration_s(bad), std::nullopt) << bad;
}
