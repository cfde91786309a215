// Pod-template discovery across workload kinds.
#include "manifests/templates.h"

#include <gtest/gtest.h>

using namespace shmguard::manifests;
using nlohmann::json;

namespace {
json tmpl() { return {{"metadata", json::object()}, {"spec", {{"containers", json::array({{{"name", "c"}}})}}}}; }
std::vector<std::string> paths(const json& doc) {
  std::vector<std::string> out;
  for (auto& t : find_templates(doc)) out.push_back(t.pointer);
  return out;
}
}  // namespace

TEST(Templates, PodIsItsOwnTemplate) {
  json pod = tmpl();
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  auto t = find_templates(pod);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].pointer, "");
  EXPECT_EQ(t[0].template_kind, TemplateKind::kPod);
  EXPECT_EQ(t[0].path, "");
  EXPECT_EQ(t[0].display_path(), "(pod)");
}

TEST(Templates, WorkloadKinds) {
  EXPECT_EQ(paths({{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"spec", {{"template", tmpl()}}}}),
            std::vector<std::string>{"/spec/template"});
  EXPECT_EQ(paths({{"apiVersion", "batch/v1"}, {"kind", "CronJob"},
                   {"spec", {{"jobTemplate", {{"spec", {{"template", tmpl()}}}}}}}}),
            std::vector<std::string>{"/spec/jobTemplate/spec/template"});
  EXPECT_EQ(paths({{"apiVersion", "v1"}, {"kind", "PodTemplate"}, {"template", tmpl()}}),
            std::vector<std::string>{"/template"});
  EXPECT_EQ(paths({{"apiVersion", "jobset.x-k8s.io/v1alpha2"}, {"kind", "JobSet"},
                   {"spec", {{"replicatedJobs", {{{"name", "w"}, {"template", {{"spec", {{"template", tmpl()}}}}}}}}}}}),
            std::vector<std::string>{"/spec/replicatedJobs/0/template/spec/template"});
  EXPECT_EQ(paths({{"apiVersion", "ray.io/v1"}, {"kind", "RayCluster"},
                   {"spec", {{"headGroupSpec", {{"template", tmpl()}}},
                             {"workerGroupSpecs", {{{"template", tmpl()}}, {{"template", tmpl()}}}}}}}),
            (std::vector<std::string>{"/spec/headGroupSpec/template", "/spec/workerGroupSpecs/0/template",
                                      "/spec/workerGroupSpecs/1/template"}));
  EXPECT_EQ(paths({{"apiVersion", "leaderworkerset.x-k8s.io/v1"}, {"kind", "LeaderWorkerSet"},
                   {"spec", {{"leaderWorkerTemplate", {{"leaderTemplate", tmpl()}, {"workerTemplate", tmpl()}}}}}}),
            (std::vector<std::string>{"/spec/leaderWorkerTemplate/leaderTemplate",
                                      "/spec/leaderWorkerTemplate/workerTemplate"}));
  EXPECT_EQ(paths({{"apiVersion", "batch.volcano.sh/v1alpha1"}, {"kind", "Job"},
                   {"spec", {{"tasks", {{{"name", "t"}, {"template", tmpl()}}}}}}}),
            std::vector<std::string>{"/spec/tasks/0/template"});
}

TEST(Templates, KubeflowKindsAreTraining) {
  json job = {{"apiVersion", "kubeflow.org/v1"}, {"kind", "PyTorchJob"}, {"metadata", {{"name", "j"}}},
              {"spec", {{"pytorchReplicaSpecs", {{"Master", {{"template", tmpl()}}}, {"Worker", {{"template", tmpl()}}}}}}}};
  auto t = find_templates(job);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_TRUE(t[0].training_kind);
  EXPECT_EQ(t[0].kind, "PyTorchJob");
  EXPECT_EQ(t[0].name, "j");
  EXPECT_EQ(t[0].path, "spec.pytorchReplicaSpecs.Master.template");
  EXPECT_TRUE(is_training_kind("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"));
  EXPECT_FALSE(is_training_kind("ray.io/v1", "RayJob"));
  EXPECT_FALSE(is_training_kind("example.com/v1", "PyTorchJob"));
}

TEST(Templates, ListItemsOwnTheirTemplates) {
  json list = {{"apiVersion", "v1"}, {"kind", "List"},
               {"items", {{{"apiVersion", "kubeflow.org/v1"}, {"kind", "TFJob"}, {"metadata", {{"name", "tf"}}},
                           {"spec", {{"tfReplicaSpecs", {{"Worker", {{"template", tmpl()}}}}}}}},
                          {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", {{"generateName", "web-"}}},
                           {"spec", {{"template", tmpl()}}}}}}};
  auto t = find_templates(list);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].kind, "TFJob");
  EXPECT_TRUE(t[0].training_kind);
  EXPECT_EQ(t[1].kind, "Deployment");
  EXPECT_EQ(t[1].name, "web-*");
  EXPECT_FALSE(t[1].training_kind);
}

TEST(Templates, KeysWithSlashesAreEscaped) {
  json doc = {{"apiVersion", "x/v1"}, {"kind", "X"}, {"spec", {{"a/b~c", {{"template", tmpl()}}}}}};
  EXPECT_EQ(paths(doc), std::vector<std::string>{"/spec/a~1b~0c/template"});
  EXPECT_NO_THROW(doc.at(json::json_pointer(paths(doc)[0])));
}

TEST(Templates, NothingInConfigMaps) {
  EXPECT_TRUE(paths({{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"data", {{"a", "b"}}}}).empty());
}

TEST(Templates, PreCheckSeesEveryContainersList) {
  auto may = [](const std::string& text) {
    YamlDocument doc;
    EXPECT_TRUE(parse_document(text, doc).ok()) << text;
    return may_hold_templates(doc.root);
  };
  EXPECT_TRUE(may("kind: Pod\nspec:\n  containers:\n  - name: c\n"));
  EXPECT_TRUE(may("kind: List\nitems:\n- kind: Deployment\n  spec: {template: {spec: {containers: []}}}\n"));
  // Conservative: a containers list anywhere, even where no template is.
  EXPECT_TRUE(may("kind: Thing\ndata:\n  \"containers\": [a]\n"));
  // A CRD's schema names containers with a mapping; a ConfigMap holds them in a string.
  EXPECT_FALSE(may("kind: CustomResourceDefinition\nspec:\n  properties:\n    containers:\n      type: array\n"));
  EXPECT_FALSE(may("kind: ConfigMap\ndata:\n  pod.yaml: |\n    spec:\n      containers: []\n"));
  EXPECT_FALSE(may("kind: Service\nspec:\n  ports:\n  - port: 80\n"));
  EXPECT_FALSE(may("just a scalar\n"));
}
