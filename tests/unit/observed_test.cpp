// Observed /dev/shm figures: both input formats, the owner table, the thresholds and every edit.
#include "manifests/observed.h"

#include <gtest/gtest.h>

#include "../test_util.h"
#include "config/config.h"
#include "inject/inject.h"
#include "manifests/document.h"
#include "sizing/quantity.h"

using namespace shmguard;
using namespace shmguard::manifests;
using nlohmann::json;

namespace {

constexpr std::uint64_t kMi = 1024 * 1024;

Observed read_ok(const std::string& text) {
  Observed seen;
  auto s = read_observed("in.txt", text, seen);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error());
  return seen;
}

std::string read_error(const std::string& text) {
  Observed seen;
  auto s = read_observed("in.txt", text, seen);
  return s.ok() ? "(no error)" : s.error();
}

ObservedPod pod(std::string ns, std::string name, std::string kind, std::string owner, std::uint64_t peak,
                std::optional<std::uint64_t> limit = std::nullopt) {
  ObservedPod p;
  p.namespace_name = std::move(ns), p.pod = std::move(name), p.owner_kind = std::move(kind), p.owner_name = std::move(owner);
  p.peak = peak, p.size_limit = limit, p.mounted = limit.value_or(64 * kMi);
  return p;
}

TemplateRef ref(std::string kind, std::string name, std::string ns = "team-a") {
  TemplateRef r;
  r.kind = std::move(kind), r.name = std::move(name), r.namespace_name = std::move(ns);
  return r;
}

config::Config cfg() { return *config::parse_config(""); }

}  // namespace

TEST(ReadObserved, TopJsonTakesTheLargerOfPeakAndUsedAndSkipsPodsWithoutFigures) {
  const Observed seen = read_ok(R"({"items": [
    {"namespace": "team-a", "pod": "bert-0", "owner": {"kind": "Job", "name": "bert"},
     "mountedBytes": 1073741824, "sizeLimitBytes": 1073741824, "usedBytes": 700, "peakBytes": 500},
    {"namespace": "team-a", "pod": "bert-1", "owner": {"kind": "Job", "name": "bert"},
     "mountedBytes": null, "usedBytes": null},
    {"namespace": "team-b", "pod": "lone", "mountedBytes": 67108864, "usedBytes": 3}
  ]})");
  ASSERT_EQ(seen.pods.size(), 2u);
  EXPECT_EQ(seen.pods[0].pod, "bert-0");
  EXPECT_EQ(seen.pods[0].owner_kind, "Job");
  EXPECT_EQ(seen.pods[0].peak, 700u);
  EXPECT_EQ(seen.pods[0].size_limit, 1073741824u);
  EXPECT_EQ(seen.pods[1].pod, "lone");
  EXPECT_EQ(seen.pods[1].owner_kind, "");
  EXPECT_FALSE(seen.pods[1].size_limit);
  EXPECT_EQ(seen.pods[1].mounted, 67108864u);
}

TEST(ReadObserved, MetricsTextMergesPeakAndSizeOfOnePod) {
  const Observed seen = read_ok(
      "# HELP shmguard_shm_peak_bytes x\n"
      "shmguard_shm_peak_bytes{namespace=\"team-a\",pod=\"w-0\",owner_kind=\"JobSet\",owner_name=\"bert\"} 9.5e+08\n"
      "shmguard_shm_size_bytes{namespace=\"team-a\",pod=\"w-0\",owner_kind=\"JobSet\",owner_name=\"bert\"} 1073741824\n"
      "shmguard_shm_used_bytes{namespace=\"team-a\",pod=\"w-0\",owner_kind=\"JobSet\",owner_name=\"bert\"} 10\n"
      "shmguard_shm_pods 3\n"
      "shmguard_cycles_total 4\n");
  ASSERT_EQ(seen.pods.size(), 1u);
  EXPECT_EQ(seen.pods[0].peak, 950000000u);
  EXPECT_EQ(seen.pods[0].mounted, 1073741824u);
  EXPECT_EQ(seen.pods[0].owner_name, "bert");
}

TEST(ReadObserved, SeveralFilesKeepEachPodsLargestPeak) {
  Observed seen;
  ASSERT_TRUE(read_observed("a", R"({"items":[{"namespace":"n","pod":"p","mountedBytes":10,"peakBytes":5}]})", seen).ok());
  ASSERT_TRUE(read_observed("b", "shmguard_shm_peak_bytes{namespace=\"n\",pod=\"p\"} 8\n", seen).ok());
  ASSERT_TRUE(read_observed("c", R"({"items":[{"namespace":"n","pod":"p","mountedBytes":10,"peakBytes":6}]})", seen).ok());
  ASSERT_EQ(seen.pods.size(), 1u);
  EXPECT_EQ(seen.pods[0].peak, 8u);
}

TEST(ReadObserved, ErrorsNameTheFileAndLine) {
  EXPECT_EQ(read_error(""), "in.txt:1: empty: give `shmguard top -o json` output or the monitor's /metrics");
  EXPECT_EQ(read_error("{\"items\": [\n  {\"pod\": }\n]}").rfind("in.txt:2: not JSON (", 0), 0u) << read_error("{\n,}");
  EXPECT_EQ(read_error("{\"pods\": []}"), "in.txt:1: not the output of `shmguard top -o json` (no \"items\" list)");
  EXPECT_EQ(read_error("{\"items\": [3]}"), "in.txt:1: an item of \"items\" is not an object");
  EXPECT_EQ(read_error("# x\nshmguard_shm_peak_bytes{pod=\"p\" 3\n"),
            "in.txt:2: not a metric sample: shmguard_shm_peak_bytes{pod=\"p\" 3");
  EXPECT_EQ(read_error("shmguard_shm_size_bytes{namespace=\"n\"} 3\n"), "in.txt:1: shmguard_shm_size_bytes without a pod label");
}

TEST(MadeBy, TheOwnerAndTheOneAnOperatorPutsBetween) {
  struct Row {
    const char *pod_kind, *pod_owner, *kind, *name;
    bool made;
  };
  const Row rows[] = {
      {"Job", "bert", "Job", "bert", true},
      {"Job", "bert", "Job", "bert2", false},
      {"ReplicaSet", "web-7d9f8c6b5", "Deployment", "web", true},
      {"ReplicaSet", "web-api-7d9f8c6b5", "Deployment", "web", false},  // web-api's, not web's
      {"ReplicaSet", "web", "Deployment", "web", false},
      {"Job", "nightly-29001234", "CronJob", "nightly", true},
      {"Job", "nightly-train", "CronJob", "nightly", false},
      {"JobSet", "bert", "TrainJob", "bert", true},
      {"JobSet", "bert-x", "TrainJob", "bert", false},
      {"RayCluster", "tune-k2v8x", "RayJob", "tune", true},
      {"RayCluster", "tune", "RayJob", "tune", false},
      {"PyTorchJob", "ddp", "PyTorchJob", "ddp", true},
      {"", "", "Pod", "lone", true},
      {"Job", "lone", "Pod", "lone", false},
  };
  for (const Row& r : rows) {
    ObservedPod p = pod("team-a", "lone", r.pod_kind, r.pod_owner, 1);
    EXPECT_EQ(made_by(p, r.kind, r.name, "team-a"), r.made) << r.pod_kind << " " << r.pod_owner << " by " << r.kind << " " << r.name;
  }
  const ObservedPod p = pod("team-a", "p", "Job", "bert", 1);
  EXPECT_TRUE(made_by(p, "Job", "bert", ""));  // a manifest with no namespace: any
  EXPECT_FALSE(made_by(p, "Job", "bert", "team-b"));
  EXPECT_FALSE(made_by(p, "Job", "", "team-a"));
}

TEST(JudgeObserved, ThresholdsAndSuggestion) {
  const auto params = cfg().sizing;
  const std::uint64_t size = 16 * 1024 * kMi;
  auto judge = [&](std::uint64_t peak) {
    Observed seen;
    seen.pods.push_back(pod("team-a", "bert-0", "Job", "bert", peak, size));
    return judge_observed(seen, ref("Job", "bert"), size, params).value();
  };
  const std::uint64_t ninety = (size * 90 + 99) / 100;  // the least that is 90%
  const OwnerSeen at90 = judge(ninety);
  EXPECT_EQ(at90.fit, Fit::kOutgrown);
  EXPECT_EQ(at90.suggested, sizing::size_for_peak(ninety, params));
  EXPECT_GT(at90.suggested, size);
  EXPECT_EQ(at90.message.rfind("outgrown: 1 pod of Job team-a/bert peaked at ", 0), 0u) << at90.message;
  EXPECT_NE(at90.message.find("90% of its 16Gi; shmguard.io/size: "), std::string::npos) << at90.message;

  EXPECT_EQ(judge(ninety - 1).fit, Fit::kFits);
  EXPECT_EQ(judge(size / 8).fit, Fit::kFits);  // exactly 8x: not more than
  const OwnerSeen waste = judge(size / 8 - kMi);
  EXPECT_EQ(waste.fit, Fit::kWasteful);
  EXPECT_LT(waste.suggested, size);
  EXPECT_NE(waste.message.find("(more than 8x what it used)"), std::string::npos) << waste.message;
  // A pod that used nothing is judged against 1 MiB: a 64Mi volume is not wasteful for it.
  Observed idle;
  idle.pods.push_back(pod("team-a", "p", "Job", "small", 0, 8 * kMi));
  EXPECT_EQ(judge_observed(idle, ref("Job", "small"), 8 * kMi, params)->fit, Fit::kFits);
  Observed none;
  EXPECT_FALSE(judge_observed(none, ref("Job", "bert"), size, params));
}

TEST(JudgeObserved, PrefersTheOwnersPodsOfTheTemplatesOwnSize) {
  // A PyTorchJob's Master (2Gi) and Worker (4Gi) templates each meet their own pods.
  Observed seen;
  seen.pods.push_back(pod("team-a", "ddp-master-0", "PyTorchJob", "ddp", 1900 * kMi, 2048 * kMi));
  seen.pods.push_back(pod("team-a", "ddp-worker-0", "PyTorchJob", "ddp", 1000 * kMi, 4096 * kMi));
  seen.pods.push_back(pod("team-a", "ddp-worker-1", "PyTorchJob", "ddp", 1100 * kMi, 4096 * kMi));
  const auto params = cfg().sizing;
  const auto master = judge_observed(seen, ref("PyTorchJob", "ddp"), 2048 * kMi, params).value();
  EXPECT_EQ(master.pods, 1u);
  EXPECT_EQ(master.fit, Fit::kOutgrown);
  const auto worker = judge_observed(seen, ref("PyTorchJob", "ddp"), 4096 * kMi, params).value();
  EXPECT_EQ(worker.pods, 2u);
  EXPECT_EQ(worker.peak, 1100 * kMi);
  EXPECT_EQ(worker.fit, Fit::kFits);
  // No pod of that size (the manifest changed since): all the owner's pods.
  const auto other = judge_observed(seen, ref("PyTorchJob", "ddp"), 3000 * kMi, params).value();
  EXPECT_EQ(other.pods, 3u);
  EXPECT_EQ(other.peak, 1900 * kMi);
}

TEST(JudgeObserved, AKubeflowReplicaMeetsItsOwnPodsByName) {
  Observed seen;
  seen.pods.push_back(pod("team-a", "ddp-master-0", "PyTorchJob", "ddp", 7800 * kMi, 8192 * kMi));
  seen.pods.push_back(pod("team-a", "ddp-worker-0", "PyTorchJob", "ddp", 2000 * kMi, 8192 * kMi));
  seen.pods.push_back(pod("team-a", "ddp-worker-1", "PyTorchJob", "ddp", 2100 * kMi, 8192 * kMi));
  TemplateRef master = ref("PyTorchJob", "ddp"), worker = ref("PyTorchJob", "ddp"), other = ref("PyTorchJob", "ddp");
  master.path = "spec.pytorchReplicaSpecs.Master.template";
  worker.path = "spec.pytorchReplicaSpecs.Worker.template";
  other.path = "spec.pytorchReplicaSpecs.Launcher.template";
  const auto params = cfg().sizing;
  const auto m = judge_observed(seen, master, 8192 * kMi, params).value();
  EXPECT_EQ(m.pods, 1u);
  EXPECT_EQ(m.fit, Fit::kOutgrown);
  const auto w = judge_observed(seen, worker, 8192 * kMi, params).value();
  EXPECT_EQ(w.pods, 2u);
  EXPECT_EQ(w.peak, 2100 * kMi);
  EXPECT_EQ(w.fit, Fit::kFits);
  // A replica none of whose pods was seen, beside others that were: no figures for it.
  EXPECT_FALSE(judge_observed(seen, other, 8192 * kMi, params));
  // Pods not named as replicas (another operator): all the owner's.
  Observed unnamed;
  unnamed.pods.push_back(pod("team-a", "ddp-a1b2c", "PyTorchJob", "ddp", 7800 * kMi, 8192 * kMi));
  EXPECT_EQ(judge_observed(unnamed, other, 8192 * kMi, params)->pods, 1u);
}

TEST(JudgeObserved, OwnersWithoutADocument) {
  Observed seen;
  seen.pods.push_back(pod("team-a", "bert-0", "Job", "bert", 1));
  seen.pods.push_back(pod("team-a", "gone-a", "JobSet", "gone", 1));
  seen.pods.push_back(pod("team-a", "gone-b", "JobSet", "gone", 1));
  seen.pods.push_back(pod("team-b", "lone", "", "", 1));
  EXPECT_EQ(owners_without_document(seen, {ref("Job", "bert")}),
            (std::vector<std::string>{"JobSet team-a/gone (2 pods)", "Pod team-b/lone (1 pod)"}));
}

namespace {

struct Edit {
  TemplateRef ref;
  json tmpl;
  inject::InjectResult result;
};

// A template as `check` finds it in a manifest, with the engine's verdict on it.
Edit template_of(const std::string& yaml, std::size_t index = 0) {
  const json doc = test::yaml_documents(yaml).at(0);
  auto refs = test::templates_of(doc);
  Edit e;
  e.ref = refs.at(index);
  e.tmpl = doc.at(json::json_pointer(e.ref.pointer));
  e.result = inject::inject_pod(e.tmpl, cfg(), engine_options(e.ref));
  return e;
}

json edit(const Edit& e, std::uint64_t size) {
  auto ops = size_edit(e.result, e.ref, e.tmpl, size, cfg());
  EXPECT_TRUE(ops.ok()) << (ops.ok() ? "" : ops.error());
  return ops.ok() ? *ops : json();
}

constexpr const char* kJob = R"(apiVersion: batch/v1
kind: Job
metadata: {name: bert, namespace: team-a}
spec:
  template:
    metadata:
      labels: {app: train}
    spec:
      containers:
      - name: t
        image: pytorch/pytorch:2.4.0
        command: [torchrun, --nproc-per-node=2, train.py]
)";

}  // namespace

TEST(SizeEdit, AnnotationAddedWhereThereIsNone) {
  const Edit e = template_of(kJob);
  EXPECT_EQ(edit(e, 1536 * kMi), json::parse(R"([{"op":"add","path":"/metadata/annotations",
                                                  "value":{"shmguard.io/size":"1536Mi"}}])"));
}

TEST(SizeEdit, AnnotationReplacedAndMetadataAdded) {
  std::string with = kJob;
  with.replace(with.find("      labels: {app: train}"), 26, "      annotations: {shmguard.io/size: 1Gi}");
  EXPECT_EQ(edit(template_of(with), 2 * 1024 * kMi),
            json::parse(R"([{"op":"replace","path":"/metadata/annotations/shmguard.io~1size","value":"2Gi"}])"));
  std::string bare = kJob;
  bare.replace(bare.find("    metadata:\n      labels: {app: train}\n"), 42, "");
  EXPECT_EQ(edit(template_of(bare), 2 * 1024 * kMi),
            json::parse(R"([{"op":"add","path":"/metadata","value":{"annotations":{"shmguard.io/size":"2Gi"}}}])"));
}

TEST(SizeEdit, UsersOwnSizeLimit) {
  std::string own = kJob;
  own += "        volumeMounts: [{name: shm, mountPath: /dev/shm}]\n"
         "      volumes:\n"
         "      - name: data\n        emptyDir: {}\n"
         "      - name: shm\n        emptyDir: {medium: Memory, sizeLimit: 16Gi}\n";
  const Edit e = template_of(own);
  ASSERT_EQ(e.result.action, inject::Action::kUserManaged);
  EXPECT_EQ(edit(e, 1024 * kMi),
            json::parse(R"([{"op":"replace","path":"/spec/volumes/1/emptyDir/sizeLimit","value":"1Gi"}])"));
  std::string unlimited = own;
  unlimited.replace(unlimited.find("{medium: Memory, sizeLimit: 16Gi}"), 33, "{medium: Memory}");
  EXPECT_EQ(edit(template_of(unlimited), 1024 * kMi),
            json::parse(R"([{"op":"add","path":"/spec/volumes/1/emptyDir/sizeLimit","value":"1Gi"}])"));
  std::string host = own;
  host.replace(host.find("emptyDir: {medium: Memory, sizeLimit: 16Gi}"), 43, "hostPath: {path: /dev/shm}");
  const Edit h = template_of(host);
  auto ops = size_edit(h.result, h.ref, h.tmpl, 1024 * kMi, cfg());
  ASSERT_FALSE(ops.ok());
  EXPECT_EQ(ops.error(), "its /dev/shm is not an emptyDir of the template's own volumes: give it sizeLimit: 1Gi");
}

TEST(SizeEdit, ShmguardsOwnVolumeIsBroughtToTheNewSize) {
  // What an earlier `mutate` left: the annotation and shmguard's volume at its size.
  const Edit first = template_of(kJob);
  ASSERT_EQ(first.result.action, inject::Action::kInjected);
  json mutated = first.tmpl;
  mutated["metadata"]["annotations"]["shmguard.io/size"] = "1Gi";
  mutated = mutated.patch(inject::inject_pod(mutated, cfg(), engine_options(first.ref)).patch);
  Edit again{first.ref, mutated, inject::inject_pod(mutated, cfg(), engine_options(first.ref))};
  const json ops = edit(again, 3 * 1024 * kMi);
  ASSERT_GE(ops.size(), 2u) << ops.dump();
  EXPECT_EQ(ops[0], json::parse(R"({"op":"replace","path":"/metadata/annotations/shmguard.io~1size","value":"3Gi"})"));
  const json after = mutated.patch(ops);
  bool sized = false;
  for (const auto& v : after["spec"]["volumes"])
    if (v.contains("emptyDir") && v["emptyDir"].value("sizeLimit", "") == "3Gi") sized = true;
  EXPECT_TRUE(sized) << after["spec"].dump();
  // And the engine then has nothing left to do.
  EXPECT_FALSE(inject::inject_pod(after, cfg(), engine_options(first.ref)).mutated());
}

TEST(SizeEdit, TrainJobGetsItsSpecAnnotations) {
  const Edit e = template_of(R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: bert, namespace: team-a}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numProcPerNode: 2
    command: [torchrun, train.py]
)");
  ASSERT_EQ(e.ref.template_kind, TemplateKind::kTrainJob);
  EXPECT_EQ(edit(e, 2 * 1024 * kMi),
            json::parse(R"([{"op":"add","path":"/spec/annotations","value":{"shmguard.io/size":"2Gi"}}])"));
}

TEST(SizeEdit, KubeRayGroupHasNoPlaceForIt) {
  const Edit e = template_of(R"(apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: tune, namespace: team-a}
spec:
  headGroupSpec:
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.9.0
)");
  auto ops = size_edit(e.result, e.ref, e.tmpl, 2 * 1024 * kMi, cfg());
  ASSERT_FALSE(ops.ok());
  EXPECT_EQ(ops.error(), "KubeRay sizes this group's /dev/shm to the container's memory limit: raise that to 2Gi");
}
