// Pod-template discovery across workload kinds.
#include "manifests/templates.h"
#include "manifests/kuberay.h"

#include <gtest/gtest.h>

#include "../test_util.h"

using namespace shmguard::manifests;
using nlohmann::json;

namespace {
std::vector<TemplateRef> found(const json& doc) { return shmguard::test::templates_of(doc); }
json tmpl() { return {{"metadata", json::object()}, {"spec", {{"containers", json::array({{{"name", "c"}}})}}}}; }
std::vector<std::string> paths(const json& doc) {
  std::vector<std::string> out;
  for (auto& t : found(doc)) out.push_back(t.pointer);
  return out;
}
}  // namespace

TEST(Templates, PodIsItsOwnTemplate) {
  json pod = tmpl();
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  auto t = found(pod);
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
  auto t = found(job);
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
  auto t = found(list);
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

// The walk reads the tree as to_json() reads it: a mapping's members in key order (the reports'
// order since the search ran on JSON), a repeated key's last value, scalars typed as Kubernetes
// reads YAML, aliases expanded.
namespace {
std::vector<TemplateRef> found_in(const std::string& text) {
  static YamlDocument tree;
  EXPECT_TRUE(parse_document(text, tree).ok()) << text;
  return find_templates(tree.root);
}
constexpr const char* kPodSpec = "spec:\n          containers:\n          - name: c\n";  // a template at column 6
}  // namespace

TEST(Templates, MembersInKeyOrderAsJsonHasThem) {
  const std::string mpi = std::string("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: m}\nspec:\n") +
                          "  mpiReplicaSpecs:\n    Worker:\n      template:\n        " + kPodSpec +
                          "    Launcher:\n      template:\n        " + kPodSpec;
  auto t = found_in(mpi);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].path, "spec.mpiReplicaSpecs.Launcher.template");
  EXPECT_TRUE(t[0].mpi_launcher);
  EXPECT_EQ(t[1].path, "spec.mpiReplicaSpecs.Worker.template");
  EXPECT_FALSE(t[1].mpi_launcher);
}

TEST(Templates, RepeatedKeyKeepsItsLastValue) {
  // The later scalar hides the template before it, and the later template counts.
  EXPECT_TRUE(found_in(std::string("apiVersion: v1\nkind: PodTemplate\ntemplate:\n  ") +
                       "spec:\n    containers:\n    - name: c\ntemplate: none\n").empty());
  auto t = found_in(std::string("apiVersion: v1\nkind: PodTemplate\nmetadata: {name: a}\nmetadata: {name: b}\n") +
                    "template: none\ntemplate:\n  spec:\n    containers:\n    - name: c\n");
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].pointer, "/template");
  EXPECT_EQ(t[0].name, "b");
  EXPECT_EQ(t[0].node->line, 7);  // the second `template:`'s value
}

TEST(Templates, OwnerFieldsTypedAsKubernetesReadsThem) {
  const std::string job = std::string("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  generateName: ft-\n") +
                          "spec:\n  nprocPerNode: 0x4\n  pytorchReplicaSpecs:\n    Worker:\n      template:\n        " + kPodSpec;
  auto t = found_in(job);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].name, "ft-*");
  ASSERT_TRUE(t[0].owner_procs.has_value());
  EXPECT_EQ(t[0].owner_procs->value, "4");  // an int in hex, as JSON has it
  // A quoted "true" is a string, not the bool runLauncherAsWorker wants; `yes` is the bool.
  const std::string mpi = std::string("apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nspec:\n  runLauncherAsWorker: X\n") +
                          "  mpiReplicaSpecs:\n    Launcher:\n      template:\n        " + kPodSpec;
  auto with = [&](const char* v) { std::string s = mpi; return found_in(s.replace(s.find('X'), 1, v)).at(0).mpi_launcher; };
  EXPECT_TRUE(with("\"true\""));
  EXPECT_FALSE(with("yes"));
  EXPECT_FALSE(with("true"));
}

TEST(Templates, AliasesExpandAsInJson) {
  auto t = found_in(std::string("apiVersion: v1\nkind: List\nitems:\n- &d\n  apiVersion: apps/v1\n  kind: Deployment\n") +
                    "  spec:\n    template:\n      spec:\n        containers:\n        - name: c\n- *d\n");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].pointer, "/items/0/spec/template");
  EXPECT_EQ(t[1].pointer, "/items/1/spec/template");
  EXPECT_EQ(t[0].node, t[1].node);  // one node in the tree, found twice
}

TEST(KubeRay, GroupTemplatesByTheirPath) {
  for (const char* p : {"spec.headGroupSpec.template", "spec.rayClusterSpec.headGroupSpec.template",
                        "spec.rayClusterConfig.workerGroupSpecs[0].template", "spec.template.spec.workerGroupSpecs[12].template"})
    EXPECT_TRUE(kuberay::is_group_template(p)) << p;
  for (const char* p : {"spec.template", "spec.myheadGroupSpec.template", "spec.workerGroupSpecs.template",
                        "spec.workerGroupSpecs[x].template", "spec.workerGroupSpecs[].template", "spec.workerGroupSpecs[0]",
                        "spec.otherworkerGroupSpecs[0].template", "", ".template"})
    EXPECT_FALSE(kuberay::is_group_template(p)) << p;
}

TEST(KubeRay, SharedMemAsTheOperatorAddsIt) {
  json t = tmpl();
  t["spec"]["containers"][0]["resources"] = {{"limits", {{"memory", "4Gi"}}}, {"requests", {{"memory", "1Gi"}}}};
  t["spec"]["containers"].push_back({{"name", "sidecar"}});
  ASSERT_TRUE(kuberay::add_shared_mem(t));
  EXPECT_EQ(t["spec"]["volumes"], json::parse(R"([{"name":"shared-mem","emptyDir":{"medium":"Memory","sizeLimit":"4Gi"}}])"));
  EXPECT_EQ(t["spec"]["containers"][0]["volumeMounts"], json::parse(R"([{"name":"shared-mem","mountPath":"/dev/shm"}])"));
  EXPECT_FALSE(t["spec"]["containers"][1].contains("volumeMounts"));  // the Ray container only
  EXPECT_FALSE(kuberay::add_shared_mem(t));                            // mounted now: nothing more

  json req = tmpl();  // the request when there is no limit; neither: no sizeLimit
  req["spec"]["containers"][0]["resources"] = {{"requests", {{"memory", "2Gi"}}}};
  ASSERT_TRUE(kuberay::add_shared_mem(req));
  EXPECT_EQ(req["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "2Gi");
  json none = tmpl();
  ASSERT_TRUE(kuberay::add_shared_mem(none));
  EXPECT_FALSE(none["spec"]["volumes"][0]["emptyDir"].contains("sizeLimit"));

  json own = tmpl();  // the user's own mount at /dev/shm/ wins
  own["spec"]["containers"][0]["volumeMounts"] = json::parse(R"([{"name":"dshm","mountPath":"/dev/shm/"}])");
  EXPECT_FALSE(kuberay::add_shared_mem(own));
  json existing = tmpl();  // a volume already named shared-mem is mounted as it is
  existing["spec"]["volumes"] = json::parse(R"([{"name":"shared-mem","emptyDir":{}}])");
  ASSERT_TRUE(kuberay::add_shared_mem(existing));
  EXPECT_EQ(existing["spec"]["volumes"].size(), 1u);
  for (json bad : {json(nullptr), json::object(), json({{"spec", 1}}), json({{"spec", {{"containers", json::array()}}}}),
                   json({{"spec", {{"containers", {1}}}}})})
    EXPECT_FALSE(kuberay::add_shared_mem(bad)) << bad.dump();
}
