// The injection engine: decisions, the patched pod, the JSON patch and idempotency.
#include "inject/inject.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace shmguard;
using namespace shmguard::inject;
using nlohmann::json;

namespace {

std::vector<std::string> texts(const Warnings& w) {
  std::vector<std::string> out;
  for (const auto& x : w.warnings) out.push_back(x.text);
  return out;
}
config::Config cfg;

json training_pod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "train", "labels": {"training.kubeflow.org/job-name": "j"},
                 "annotations": {"shmguard.io/batch-size": "32", "shmguard.io/num-workers": "4",
                                 "shmguard.io/sample-size": "1Mi", "shmguard.io/prefetch-factor": "4"}},
    "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y",
             "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
             "initContainers": [{"name": "init", "image": "z"}],
             "volumes": [{"name": "data", "emptyDir": {}}]}
  })");
}
json patched(const json& pod, const InjectResult& r) { return pod.patch(r.patch); }
}  // namespace

TEST(Inject, AddsVolumeMountsAndAnnotations) {
  const auto pod = training_pod();
  auto r = inject_pod(pod, cfg);
  ASSERT_TRUE(r.mutated()) << r.summary;
  EXPECT_EQ(r.reason, Reason::kInjected);
  EXPECT_EQ(r.size(), 1120 * sizing::kMi);
  const auto p = patched(pod, r);
  EXPECT_EQ(p["spec"]["volumes"].size(), 2u);
  EXPECT_EQ(p["spec"]["volumes"][1],
            json::parse(R"({"name":"shmguard-dshm","emptyDir":{"medium":"Memory","sizeLimit":"1120Mi"}})"));
  EXPECT_EQ(p["spec"]["containers"][0]["volumeMounts"],
            json::parse(R"([{"name":"shmguard-dshm","mountPath":"/dev/shm"}])"));
  EXPECT_EQ(p["spec"]["containers"][1]["volumeMounts"].size(), 2u);
  EXPECT_FALSE(p["spec"]["initContainers"][0].contains("volumeMounts"));
  EXPECT_EQ(p["metadata"]["annotations"]["shmguard.io/injected-size"], "1120Mi");
  EXPECT_NE(p["metadata"]["annotations"]["shmguard.io/sizing"].get<std::string>().find("576Mi"), std::string::npos);
}

TEST(Inject, PatchReproducesThePatchedPod) {
  auto pod = training_pod();
  auto r = inject_pod(pod, cfg);
  EXPECT_EQ(pod.patch(json::diff(pod, patched(pod, r))), patched(pod, r));
  // Keys with '/' are escaped as ~1 in the patch.
  EXPECT_NE(r.patch.dump().find("shmguard.io~1injected-size"), std::string::npos);
}

TEST(Inject, CreatesMissingFields) {
  json pod = {{"spec", {{"containers", {{{"name", "c"}, {"image", "pytorch/pytorch"}}}}}}};
  auto r = inject_pod(pod, cfg);
  ASSERT_TRUE(r.mutated());
  EXPECT_TRUE(patched(pod, r)["metadata"]["annotations"].is_object());
  EXPECT_EQ(r.size(), 8 * sizing::kGi);
}

TEST(Inject, NullFieldsAreReplaced) {
  json pod = json::parse(R"({"metadata":{"annotations":null,"labels":{"shmguard.io/inject":"true"}},
    "spec":{"volumes":null,"containers":[{"name":"c","volumeMounts":null}]}})");
  auto r = inject_pod(pod, cfg);
  ASSERT_TRUE(r.mutated());
  const auto p = patched(pod, r);
  EXPECT_EQ(p["spec"]["volumes"].size(), 1u);
  EXPECT_EQ(p["spec"]["containers"][0]["volumeMounts"].size(), 1u);
  EXPECT_EQ(p["metadata"]["annotations"].size(), 2u);
}

TEST(Inject, IdempotentOnItsOwnOutput) {
  const auto pod = training_pod();
  auto r = inject_pod(pod, cfg);
  auto again = inject_pod(patched(pod, r), cfg);
  EXPECT_FALSE(again.mutated());
  EXPECT_EQ(again.reason, Reason::kAlreadyInjected);
  EXPECT_TRUE(again.patch.empty());
}

TEST(Inject, InitContainersWhenConfigured) {
  config::Config c;
  c.selection.inject_init_containers = true;
  const auto pod = training_pod();
  auto r = inject_pod(pod, c);
  EXPECT_EQ(patched(pod, r)["spec"]["initContainers"][0]["volumeMounts"][0]["mountPath"], "/dev/shm");
}

TEST(Inject, UserManagedShmIsLeftAloneAndChecked) {
  auto pod = training_pod();
  pod["spec"]["volumes"].push_back({{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}});
  pod["spec"]["containers"][0]["volumeMounts"] = {{{"name", "dshm"}, {"mountPath", "/dev/shm/"}}};
  auto r = inject_pod(pod, cfg);
  EXPECT_FALSE(r.mutated());
  EXPECT_EQ(r.action, Action::kUserManaged);
  EXPECT_TRUE(r.too_small);
  EXPECT_EQ(r.summary, "too small: has 1Gi, needs 1120Mi");
  ASSERT_FALSE(r.warnings.empty());
  pod["spec"]["volumes"][1]["emptyDir"]["sizeLimit"] = "2Gi";
  r = inject_pod(pod, cfg);
  EXPECT_FALSE(r.too_small);
  EXPECT_EQ(r.summary, "ok: /dev/shm already mounted (2Gi)");
}

TEST(Inject, BadAnnotationsWarnAndFallBack) {
  auto pod = training_pod();
  pod["metadata"]["annotations"]["shmguard.io/batch-size"] = "thirty-two";
  pod["metadata"]["annotations"]["shmguard.io/prefetch-factor"] = "0";
  auto r = inject_pod(pod, cfg);
  ASSERT_TRUE(r.mutated());
  EXPECT_EQ(r.size(), 8 * sizing::kGi);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_NE(r.warnings[0].text.find("shmguard.io/batch-size \"thirty-two\""), std::string::npos) << r.warnings[0].text;
  EXPECT_NE(r.warnings[1].text.find("shmguard.io/prefetch-factor"), std::string::npos);
}

TEST(Inject, GpuLimitSetsProcesses) {
  auto pod = training_pod();
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "4"}}}};
  auto r = inject_pod(pod, cfg);
  ASSERT_TRUE(r.sizing);
  // 4 x 576Mi x 1.5 + 4 x 64Mi + 256Mi = 3456 + 256 + 256 = 3968Mi
  EXPECT_EQ(r.size(), 3968 * sizing::kMi);
  EXPECT_NE(r.sizing->explanation.find("procs 4 from nvidia.com/gpu limit"), std::string::npos)
      << r.sizing->explanation;
}

TEST(Inject, MemoryLimitWarning) {
  auto pod = training_pod();
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"memory", "512Mi"}}}};
  pod["spec"]["containers"][1]["resources"] = {{"limits", {{"memory", "256Mi"}}}};
  auto r = inject_pod(pod, cfg);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].text.find("768Mi"), std::string::npos) << r.warnings[0].text;
  // Pod-level resources win over the container sum.
  pod["spec"]["resources"] = {{"limits", {{"memory", "64Gi"}}}};
  EXPECT_TRUE(inject_pod(pod, cfg).warnings.empty());
}

TEST(Inject, MalformedPodsAreSkippedWithAWarningThatNamesTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"metadata":{"labels":{"shmguard.io/inject":"true"}},"spec":{"containers":"x"}})",
       "spec.containers is missing, empty or not a list"},
      {R"({"metadata":{"labels":{"shmguard.io/inject":"true"}},"spec":{"containers":[1]}})",
       "an entry of spec.containers is not an object"},
      {R"({"metadata":{"labels":{"shmguard.io/inject":"true"}},"spec":{"containers":[{}],"volumes":{}}})",
       "spec.volumes is not a list"},
      {R"({"metadata":{"labels":{"shmguard.io/inject":"true"},"annotations":[]},"spec":{"containers":[{}]}})",
       "metadata.annotations is not an object"},
      {R"({"metadata":{"labels":{"shmguard.io/inject":"true"}},"spec":{"containers":[{"volumeMounts":7}]}})",
       "volumeMounts of a container in spec.containers is not a list"},
      {R"({"metadata":{"labels":{"shmguard.io/inject":"true"}}})", "spec is missing or not an object"},
  };
  for (const auto& [text, why] : cases) {
    auto r = inject_pod(json::parse(text), cfg);
    EXPECT_FALSE(r.mutated()) << text;
    EXPECT_EQ(r.reason, Reason::kInvalidPod) << text;
    EXPECT_EQ(texts(r), std::vector<std::string>{std::string("shmguard left the pod unchanged: ") + why}) << text;
  }
}

// The user's own /dev/shm is sized like any other for the comparison, and the formula's warnings
// about that size reach the user here too (they used to be dropped on this branch alone).
TEST(Inject, AUsersOwnShmGetsTheFormulasWarnings) {
  json pod = json::parse(R"({"metadata":{"labels":{"training.kubeflow.org/job-name":"j"},
    "annotations":{"shmguard.io/batch-size":"64","shmguard.io/num-workers":"8","shmguard.io/sample-size":"8Mi"}},
    "spec":{"containers":[{"name":"c","image":"pytorch/pytorch","resources":{"limits":{"memory":"4Gi"}},
      "volumeMounts":[{"name":"dshm","mountPath":"/dev/shm"}]}],
      "volumes":[{"name":"dshm","emptyDir":{"medium":"Memory","sizeLimit":"64Gi"}}]}})");
  auto r = inject_pod(pod, cfg);
  EXPECT_EQ(r.reason, Reason::kUserManaged);
  EXPECT_FALSE(r.too_small);
  ASSERT_TRUE(r.sizing.has_value());
  EXPECT_TRUE(r.sizing->exceeds_memory_limit);
  EXPECT_EQ(std::count_if(r.warnings.begin(), r.warnings.end(),
                          [](const Warning& w) { return w.text.find("exceeds the pod memory limit 4Gi") != std::string::npos; }),
            1)
      << ::testing::PrintToString(texts(r));
  // Without anything that gives a size, nothing is computed and nothing is said about it.
  pod["metadata"].erase("annotations");
  auto plain = inject_pod(pod, cfg);
  EXPECT_FALSE(plain.sizing.has_value());
  EXPECT_TRUE(plain.warnings.empty()) << ::testing::PrintToString(plain.warnings);
}

TEST(Inject, SkipReasons) {
  json p = {{"spec", {{"containers", {{{"name", "c"}, {"image", "nginx"}}}}}}};
  EXPECT_EQ(inject_pod(p, cfg).reason, Reason::kNotTraining);
  p["spec"]["hostIPC"] = true;
  p["metadata"]["labels"]["shmguard.io/inject"] = "true";
  EXPECT_EQ(inject_pod(p, cfg).reason, Reason::kHostIpc);
  p["metadata"]["labels"]["shmguard.io/inject"] = "false";
  EXPECT_EQ(inject_pod(p, cfg).reason, Reason::kOptedOut);
}

TEST(Inject, ZeroWorkersAndOneProcessNeedNoShm) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "python:3.11"},
                                         {"command", {"python", "-m", "torch.distributed.run", "imagenet.py",
                                                      "--batch-size=32", "--workers=0"}}}}}}}};
  auto r = inject_pod(pod, cfg);
  EXPECT_EQ(r.reason, Reason::kNoneNeeded);
  EXPECT_EQ(r.summary, "ok: none needed (0 DataLoader workers, 1 process)");
  EXPECT_TRUE(r.patch.empty());
  EXPECT_TRUE(r.warnings.empty()) << testing::PrintToString(texts(r));
  // Two processes: NCCL between them goes through /dev/shm.
  pod["spec"]["containers"][0]["command"].push_back("--nproc_per_node=2");
  pod["spec"]["containers"][0]["command"] = {"torchrun", "--nproc_per_node=2", "imagenet.py", "--workers=0"};
  EXPECT_TRUE(inject_pod(pod, cfg).mutated());
  // An explicit opt-in is honoured.
  pod["spec"]["containers"][0]["command"] = {"python", "-m", "torch.distributed.run", "imagenet.py", "--workers=0"};
  pod["metadata"]["labels"] = {{"shmguard.io/inject", "true"}};
  EXPECT_TRUE(inject_pod(pod, cfg).mutated());
}

TEST(Inject, AcceleratorsNotNamedNvidiaGpuSetProcesses) {
  for (const char* name : {"nvidia.com/a40", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "habana.ai/gaudi",
                           "aws.amazon.com/neuroncore", "gpu.intel.com/i915"}) {
    auto pod = training_pod();
    pod["spec"]["containers"][0]["resources"] = {{"limits", {{name, "4"}}}};
    auto r = inject_pod(pod, cfg);
    ASSERT_TRUE(r.sizing) << name;
    EXPECT_EQ(r.size(), 3968 * sizing::kMi) << name << ": " << r.sizing->explanation;
  }
}

TEST(Inject, EverySizingTextNamesTheRecognisingRule) {
  auto r = inject_pod(training_pod(), cfg);  // a sizing annotation decides before the label
  ASSERT_TRUE(r.sizing);
  EXPECT_TRUE(r.sizing->explanation.ends_with(" (recognised by: annotation shmguard.io/batch-size)"))
      << r.sizing->explanation;
  auto pod = training_pod();
  pod["metadata"].erase("annotations");
  r = inject_pod(pod, cfg);
  EXPECT_TRUE(r.sizing->explanation.ends_with(" (recognised by: label training.kubeflow.org/job-name)"))
      << r.sizing->explanation;
}

TEST(Inject, InferenceGetsTheConfiguredSize) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "vllm"}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "vllm/vllm-openai:v0.6.3"},
                                         {"args", {"--model", "m", "--tensor-parallel-size", "2"}},
                                         {"command", {"python3", "-m", "vllm.entrypoints.openai.api_server"}},
                                         {"resources", {{"limits", {{"nvidia.com/gpu", "2"}}}}}}}}}}};
  auto r = inject_pod(pod, cfg);
  ASSERT_TRUE(r.mutated()) << r.summary;
  EXPECT_EQ(r.size(), 2 * sizing::kGi);
  EXPECT_NE(r.sizing->explanation.find("inference"), std::string::npos) << r.sizing->explanation;
  config::Config big = cfg;
  big.inference.size = 4 * sizing::kGi;
  EXPECT_EQ(inject_pod(pod, big).size(), 4 * sizing::kGi);
  big.inference.enabled = false;
  EXPECT_FALSE(inject_pod(pod, big).mutated());
}
