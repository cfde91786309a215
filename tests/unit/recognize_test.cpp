// Recognition rules in the order of docs/sizing.md, image parsing and globbing.
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
  EXPECT_EQ(r.verdict, RecognitionVerdict::kOptedOut);
  EXPECT_EQ(recognize(pod(nullptr, {{"shmguard.io/inject", "False"}}, "pytorch/pytorch"), cfg).verdict,
            RecognitionVerdict::kOptedOut);
}

TEST(Recognize, HostIpcBeatsOptIn) {
  auto r = recognize(pod({{"shmguard.io/inject", "true"}}, nullptr, "pytorch/pytorch", true), cfg);
  EXPECT_EQ(r.verdict, RecognitionVerdict::kHostIPC);
}

TEST(Recognize, OptInAndSizingAnnotations) {
  EXPECT_EQ(recognize(pod({{"shmguard.io/inject", "true"}}, nullptr), cfg).verdict, RecognitionVerdict::kTraining);
  EXPECT_EQ(recognize(pod(nullptr, {{"shmguard.io/inject", "true"}}), cfg).verdict, RecognitionVerdict::kTraining);
  for (const char* key : {"shmguard.io/batch-size", "shmguard.io/num-workers", "shmguard.io/sample-size",
                          "shmguard.io/prefetch-factor", "shmguard.io/procs-per-pod", "shmguard.io/size"}) {
    auto r = recognize(pod(nullptr, {{key, "garbage"}}), cfg);
    EXPECT_EQ(r.verdict, RecognitionVerdict::kTraining) << key;
    EXPECT_EQ(r.because, std::string("annotation ") + key);
  }
}

TEST(Recognize, LabelKeys) {
  for (const char* key : {"training.kubeflow.org/job-name", "training.kubeflow.org/replica-type"}) {
    auto r = recognize(pod({{key, "x"}}, nullptr), cfg);
    EXPECT_EQ(r.verdict, RecognitionVerdict::kTraining) << key;
    EXPECT_EQ(r.because, std::string("label ") + key);
  }
  EXPECT_EQ(recognize(pod({{"app", "web"}}, nullptr), cfg).verdict, RecognitionVerdict::kNotTraining);
}

TEST(Recognize, LabelKeyEqualsValue) {
  // Kubeflow Trainer's trainer step is a training pod; its initializer steps run no DataLoader.
  const char* step = "trainer.kubeflow.org/trainjob-ancestor-step";
  auto r = recognize(pod({{step, "trainer"}}, nullptr), cfg);
  EXPECT_EQ(r.verdict, RecognitionVerdict::kTraining);
  EXPECT_EQ(r.because, "label trainer.kubeflow.org/trainjob-ancestor-step=trainer");
  for (const char* other : {"dataset-initializer", "model-initializer", "trainerx", ""})
    EXPECT_EQ(recognize(pod({{step, other}}, nullptr), cfg).verdict, RecognitionVerdict::kNotTraining) << other;
  config::SelectionConfig custom;
  custom.label_keys = {"team=ml", "gpu"};
  EXPECT_EQ(recognize(pod({{"team", "ml"}}, nullptr), custom).verdict, RecognitionVerdict::kTraining);
  EXPECT_EQ(recognize(pod({{"team", "web"}}, nullptr), custom).verdict, RecognitionVerdict::kNotTraining);
  EXPECT_EQ(recognize(pod({{"gpu", "anything"}}, nullptr), custom).verdict, RecognitionVerdict::kTraining);
}

TEST(Recognize, Images) {
  for (const char* img : {"pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", "nvcr.io/nvidia/pytorch:24.05-py3",
                          "registry.local:5000/ml/pytorch-train@sha256:0123abcd",
                          "registry.local:5000/ml/pytorch-train:1.0@sha256:0123abcd", "ghcr.io/org/my-pytorch"}) {
    EXPECT_EQ(recognize(pod(nullptr, nullptr, img), cfg).verdict, RecognitionVerdict::kTraining) << img;
  }
  // "pytorch" only in the tag or the registry port does not count.
  for (const char* img : {"rayproject/ray-ml:2.9.0-pytorch", "nginx:1.25", "busybox@sha256:pytorch"}) {
    EXPECT_EQ(recognize(pod(nullptr, nullptr, img), cfg).verdict, RecognitionVerdict::kNotTraining) << img;
  }
}

TEST(Recognize, InvalidInjectValueWarnsAndFallsThrough) {
  auto r = recognize(pod({{"shmguard.io/inject", "maybe"}}, nullptr, "pytorch/pytorch"), cfg);
  EXPECT_EQ(r.verdict, RecognitionVerdict::kTraining);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].text.find("maybe"), std::string::npos);
}

TEST(Recognize, WrongTypesAreIgnoredNotFatal) {
  json p = {{"metadata", {{"labels", json::array({1, 2})}, {"annotations", "x"}}},
            {"spec", {{"containers", "nope"}, {"hostIPC", "yes"}}}};
  EXPECT_EQ(recognize(p, cfg).verdict, RecognitionVerdict::kNotTraining);
  EXPECT_EQ(recognize(json(42), cfg).verdict, RecognitionVerdict::kNotTraining);
  EXPECT_EQ(recognize(json::array(), cfg).verdict, RecognitionVerdict::kNotTraining);
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
    EXPECT_EQ(r.verdict == RecognitionVerdict::kTraining, row.sizing || row.key == kInjectKey) << row.key;
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

namespace {
json running(json command, json args = nullptr, std::string image = "python:3.11") {
  json p = pod(nullptr, nullptr, image);
  if (!command.is_null()) p["spec"]["containers"][0]["command"] = command;
  if (!args.is_null()) p["spec"]["containers"][0]["args"] = args;
  return p;
}
}  // namespace

TEST(Recognize, KubeflowKindsThatAreNotPyTorchNeedSomethingThatSaysPyTorch) {
  // A JAXJob's pod as the training operator makes it: the same job-name label as a PyTorchJob's.
  json labels = {{"training.kubeflow.org/job-name", "jax-mnist"}, {"training.kubeflow.org/operator-name", "jaxjob-controller"}};
  auto r = recognize(pod(labels, nullptr, "docker.io/kubeflow/jaxjob-dist-spmd-mnist"), cfg);
  EXPECT_EQ(r.verdict, RecognitionVerdict::kNotTraining);
  EXPECT_EQ(r.not_pytorch_kind, "JAXJob");
  EXPECT_EQ(r.because, "JAXJob, and no PyTorch image, command or annotation");
  // The controller ownerReference says the same; offline the owner's kind does.
  json owned = pod({{"training.kubeflow.org/job-name", "t"}}, nullptr);
  owned["metadata"]["ownerReferences"] = {{{"apiVersion", "kubeflow.org/v1"}, {"kind", "TFJob"}, {"name", "t"}}};
  EXPECT_EQ(recognize(owned, cfg).not_pytorch_kind, "TFJob");
  EXPECT_EQ(recognize(pod(nullptr, nullptr), cfg, {.assume_training = true, .owner_kind = "XGBoostJob"}).verdict,
            RecognitionVerdict::kNotTraining);
  // A PyTorch image, command or annotation makes it training.
  EXPECT_EQ(recognize(pod(labels, nullptr, "pytorch/pytorch:2.4"), cfg).verdict, RecognitionVerdict::kTraining);
  json torchrun = running({"torchrun", "--nproc_per_node=2", "train.py"});
  torchrun["metadata"]["labels"] = labels;
  EXPECT_EQ(recognize(torchrun, cfg).because, "command torchrun in command");
  EXPECT_EQ(recognize(pod(labels, {{"shmguard.io/num-workers", "4"}}), cfg).verdict, RecognitionVerdict::kTraining);
}

TEST(Recognize, ATrainingJobsTemplateNamesTheLabelItsPodsWillCarry) {
  // Offline and the webhook name the same rule in the sizing text.
  auto r = recognize(pod(nullptr, nullptr), cfg, {.assume_training = true, .owner_kind = "PyTorchJob"});
  EXPECT_EQ(r.verdict, RecognitionVerdict::kTraining);
  EXPECT_EQ(r.because, "template of a training job (PyTorchJob)");
  EXPECT_EQ(r.rule, "label training.kubeflow.org/job-name");
  EXPECT_EQ(recognize(pod({{"training.kubeflow.org/job-name", "j"}}, nullptr), cfg).rule, r.rule);
  // Without that label configured the template itself is the rule.
  config::SelectionConfig none = cfg;
  none.label_keys = {"team=ml"};
  EXPECT_EQ(recognize(pod(nullptr, nullptr), none, {.assume_training = true, .mpi_launcher = false, .owner_kind = {}}).rule, "template of a training job");
}

TEST(Recognize, ServingImagesAreNotTrainingByTheImageRule) {
  for (const char* image : {"pytorch/torchserve-nightly:latest-gpu", "pytorch/torchserve:0.12.0"}) {
    auto r = recognize(pod(nullptr, nullptr, image), cfg);
    EXPECT_EQ(r.verdict, RecognitionVerdict::kNotTraining) << image;
  }
  // A serving command in a pytorch image: still not training.
  EXPECT_EQ(recognize(running({"torchserve", "--start"}, nullptr, "pytorch/pytorch:2.4"), cfg).verdict,
            RecognitionVerdict::kNotTraining);
  // The list is configured.
  config::SelectionConfig plain = cfg;
  plain.serving_names.clear();
  EXPECT_EQ(recognize(pod(nullptr, nullptr, "pytorch/torchserve:0.12.0"), plain).verdict, RecognitionVerdict::kTraining);
}

TEST(Recognize, ArgsOnlyLaunchersAndHuggingFaceFlags) {
  // torchelastic's sample: the image's entrypoint is the launcher, args start with its flags.
  auto r = recognize(running(nullptr, {"--nproc_per_node=8", "main.py", "--batch-size=32", "--workers=4"}), cfg);
  EXPECT_EQ(r.verdict, RecognitionVerdict::kTraining) << r.because;
  for (const char* flag : {"--dataloader_num_workers=8", "--dataloader-num-workers=8"}) {
    auto hf = recognize(running({"python", "train.py", flag}), cfg);
    EXPECT_EQ(hf.verdict, RecognitionVerdict::kTraining) << flag;
  }
  // PyTorch's ImageNet example's short flag, on a Python command line only.
  EXPECT_EQ(recognize(running({"python", "main.py", "-j", "8", "-b", "128"}), cfg).verdict, RecognitionVerdict::kTraining);
  EXPECT_EQ(recognize(running({"make", "-j", "8"}), cfg).verdict, RecognitionVerdict::kNotTraining);
}

TEST(Recognize, InferenceWithTensorParallelInOnePod) {
  json vllm = running({"vllm", "serve", "meta-llama/Llama-3.1-70B", "--tensor-parallel-size", "4"}, nullptr,
                      "vllm/vllm-openai:v0.6.3");
  vllm["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "4"}}}};
  auto r = recognize(vllm, cfg);
  EXPECT_EQ(r.verdict, RecognitionVerdict::kInference);
  EXPECT_EQ(r.tensor_parallel, 4u);
  EXPECT_EQ(r.accelerators, 4u);
  // Fewer accelerators than ranks: the ranks are elsewhere, nothing shared in this pod.
  vllm["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1";
  EXPECT_EQ(recognize(vllm, cfg).verdict, RecognitionVerdict::kNotTraining);
  // The off switch.
  vllm["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4";
  EXPECT_EQ(recognize(vllm, cfg, {.assume_training = false, .mpi_launcher = false, .owner_kind = {}, .inference = false}).verdict, RecognitionVerdict::kNotTraining);
  // Other accelerator names count (a configured glob list).
  json tgi = running({"text-generation-launcher", "--num-shard", "2"}, nullptr, "ghcr.io/huggingface/text-generation-inference:2.4");
  tgi["spec"]["containers"][0]["resources"] = {{"limits", {{"amd.com/gpu", "2"}}}};
  EXPECT_EQ(recognize(tgi, cfg).verdict, RecognitionVerdict::kInference);
}
