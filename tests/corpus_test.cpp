// Real-world manifests (../shared/corpus, read-only): every file goes through `mutate`; files
// without changes come out identical; Kubeflow job templates are injected unless they already
// mount /dev/shm; removing shmguard's additions gives back the parsed input; and the webhook
// path agrees with the offline path on every template.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "admission/review.h"
#include "manifests/offline.h"
#include "manifests/templates.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace shmguard;
using nlohmann::json;

namespace {

// ../shared/corpus, or this project's own (tests/corpus, its answers in expected.yaml).
std::vector<std::string> corpus_files(const fs::path& dir = SHMGUARD_CORPUS_DIR) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() != ".md" && e.path().filename() != "expected.yaml")
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> all_corpus_files() {
  auto out = corpus_files();
  auto own = corpus_files(SHMGUARD_OWN_CORPUS_DIR);
  out.insert(out.end(), own.begin(), own.end());
  return out;
}

// Undoes a template's patch (only "add" operations are expected) on `doc`, last operation first.
void undo_patch(json& doc, const std::string& prefix, const json& patch) {
  for (auto it = patch.rbegin(); it != patch.rend(); ++it) {
    ASSERT_EQ((*it)["op"], "add") << it->dump();
    std::string path = prefix + (*it)["path"].get<std::string>();
    if (path.size() >= 2 && path.compare(path.size() - 2, 2, "/-") == 0) {
      json& arr = doc.at(json::json_pointer(path.substr(0, path.size() - 2)));
      arr.erase(arr.end() - 1);
    } else {
      json::json_pointer ptr(path);
      doc.at(ptr.parent_pointer()).erase(ptr.back());
    }
  }
}

class Corpus : public ::testing::TestWithParam<std::string> {};

TEST_P(Corpus, MutateRoundTripsAndAgreesWithWebhook) {
  const std::string path = GetParam();
  const std::string input = test::read_file(path);
  config::Config cfg;
  std::ostringstream out;
  manifests::OfflineRunner runner(cfg, manifests::OutputFormat::kYaml, out);
  std::istringstream in(input);
  auto done = runner.process(path, in);
  // The own corpus keeps one manifest that is invalid as published; expected.yaml says how it fails.
  if (!done.ok() && path.starts_with(SHMGUARD_OWN_CORPUS_DIR) && done.error().find(": invalid YAML: ") != std::string::npos)
    GTEST_SKIP() << done.error();
  ASSERT_TRUE(done.ok()) << done.error();
  runner.finish();

  bool any_mutated = false;
  for (const auto& r : runner.reports()) {
    any_mutated = any_mutated || r.result.mutated();
    bool kubeflow_job = r.ref.kind == "PyTorchJob" || r.ref.kind == "TFJob" || r.ref.kind == "MPIJob";
    if (kubeflow_job) {
      // An MPI launcher that only runs mpirun loads no data (docs/sizing.md "What shmguard does to a pod").
      const bool mpi_launcher = r.result.because.starts_with("MPI launcher: runs only mpirun");
      EXPECT_EQ(mpi_launcher, r.ref.path.find("mpiReplicaSpecs.Launcher.") != std::string::npos && !r.result.mutated())
          << r.file << " " << r.ref.path << ": " << r.result.because;
      // Nor does a pod whose command says 0 workers in 1 process, nor a kind that is not PyTorch.
      const bool not_pytorch = r.result.summary.starts_with("skipped: not PyTorch (");
      EXPECT_TRUE(r.result.mutated() || r.result.reason == Reason::kUserManaged || r.result.reason == Reason::kOptedOut ||
                  r.result.reason == Reason::kNoneNeeded || mpi_launcher || not_pytorch)
          << r.file << " " << r.ref.path << ": " << r.result.summary;
    }
  }
  if (!any_mutated) {
    EXPECT_EQ(out.str(), input) << "nothing injected, so the file must come out byte-for-byte";
    return;
  }
  auto before = test::yaml_documents(input);
  auto after = test::yaml_documents(out.str());
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    // Offline and webhook agree on every template of this document.
    auto templates = test::templates_of(before[i]);
    auto mutated_templates = test::templates_of(after[i]);
    ASSERT_EQ(templates.size(), mutated_templates.size());
    for (std::size_t k = 0; k < templates.size(); ++k) {
      // The report's ref carries what the pod is built with besides the template (an Argo
      // workflow's volumes, a TrainJob's runtime).
      const auto rep = std::find_if(runner.reports().begin(), runner.reports().end(), [&](const auto& r) {
        return r.document == static_cast<int>(i) + 1 && r.ref.pointer == templates[k].pointer;
      });
      ASSERT_NE(rep, runner.reports().end()) << templates[k].path;
      // In the cluster the operator labels these pods and sets PET_NPROC_PER_NODE; so does this.
      json pod = manifests::operator_pod(before[i].at(json::json_pointer(templates[k].pointer)), rep->ref);
      auto outcome = admission::handle_review(test::admission_review("admission.k8s.io/v1", pod).dump(), cfg);
      json resp = json::parse(outcome.body)["response"];
      json offline = after[i].at(json::json_pointer(mutated_templates[k].pointer));
      if (rep->ref.template_kind == manifests::TemplateKind::kTrainJob ||
          rep->ref.template_kind == manifests::TemplateKind::kArgo) {
        // Built pods: the webhook sizes the built pod as offline reported it (a TrainJob is never
        // written, an Argo template's edit lands in other places).
        ASSERT_EQ(resp.contains("patch"), rep->result.mutated()) << templates[k].path;
        if (!resp.contains("patch")) continue;
        json webhook = pod.patch(json::parse(test::base64_decode(resp["patch"])));
        EXPECT_EQ(webhook["metadata"]["annotations"]["shmguard.io/injected-size"],
                  sizing::format_quantity(rep->result.size())) << templates[k].path;
        continue;
      }
      if (!resp.contains("patch")) {
        EXPECT_EQ(offline, before[i].at(json::json_pointer(templates[k].pointer))) << templates[k].path;
        continue;
      }
      json webhook = pod.patch(json::parse(test::base64_decode(resp["patch"])));
      if (const auto& owner = templates[k].owner_procs) {
        // What the operator added is not shmguard's: its env leaves the comparison, and the
        // webhook names the env where offline names the owner's field it came from.
        const json& own = offline["spec"]["containers"];
        for (std::size_t c = 0; c < webhook["spec"]["containers"].size(); ++c) {
          json& container = webhook["spec"]["containers"][c];
          if (container["env"] == own.at(c).value("env", json())) continue;  // the template's own
          auto& env = container["env"];
          env.erase(std::remove_if(env.begin(), env.end(), [](const json& e) { return e.value("name", "") == "PET_NPROC_PER_NODE"; }),
                    env.end());
          if (env.empty()) container.erase("env");
        }
        auto& text = webhook["metadata"]["annotations"]["shmguard.io/sizing"].get_ref<std::string&>();
        text = test::sizing_as_offline(text, owner->field);
      }
      EXPECT_EQ(webhook["spec"], offline["spec"]) << templates[k].path;
      EXPECT_EQ(webhook["metadata"]["annotations"], offline["metadata"]["annotations"]) << templates[k].path;
    }
    for (const auto& r : runner.reports())
      if (r.document == static_cast<int>(i) + 1 && r.result.mutated()) undo_patch(after[i], r.ref.pointer, r.result.patch);
    EXPECT_EQ(after[i], before[i]) << "document " << i + 1 << " changed beyond shmguard's additions";
  }
}

// The runner writes a document without a mapping whose "containers" is a list as it came, without
// searching it (may_hold_templates): on every real document, the search finds no template there.
TEST_P(Corpus, NoTemplateWhereThePreCheckSeesNone) {
  std::istringstream in(test::read_file(GetParam()));
  manifests::DocumentReader reader(in);
  manifests::RawDocument raw;
  manifests::YamlDocument tree;
  while (reader.next(raw)) {
    if (!manifests::parse_document(raw.text, tree).ok() || !tree.root || tree.has_aliases) continue;
    if (!manifests::may_hold_templates(tree.root)) {
      EXPECT_TRUE(manifests::find_templates(tree.root).empty()) << GetParam() << ":" << raw.first_line;
    }
  }
}

// Without ../shared/corpus (e.g. inside `docker build`) there are no files: not a failure.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Corpus);
INSTANTIATE_TEST_SUITE_P(Files, Corpus, ::testing::ValuesIn(all_corpus_files()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string n = fs::path(param.param).filename().string();
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return n + "_" + std::to_string(param.index);
                         });

TEST(CorpusSuite, HasTheSixtyFiles) {
  if (corpus_files().empty()) GTEST_SKIP() << "corpus not found at " << SHMGUARD_CORPUS_DIR;
  EXPECT_EQ(corpus_files().size(), 60u);
}

// Kubeflow Trainer runtimes: the trainer step runs DataLoaders, the dataset- and model-initializer
// steps (same label key on their Job template, their own values) do not.
TEST(CorpusSuite, TrainerInitializerStepsAreNotTrainingPods) {
  if (corpus_files().empty()) GTEST_SKIP() << "corpus not found at " << SHMGUARD_CORPUS_DIR;
  std::set<std::string> seen;
  for (const char* file : {"kubeflow__trainer/examples__yaml__05-multi-step.yaml",
                           "kubeflow__trainer/manifests__base__runtimes__torchtune__llama3_2__llama3_2_1B.yaml"}) {
    fs::path p = fs::path(SHMGUARD_CORPUS_DIR) / file;
    const std::string text = test::read_file(p);
    config::Config cfg;
    std::ostringstream out;
    manifests::OfflineRunner runner(cfg, manifests::OutputFormat::kNone, out);
    std::istringstream in(text);
    auto done = runner.process(p.string(), in);
    ASSERT_TRUE(done.ok()) << done.error();
    const auto docs = test::yaml_documents(text);
    for (const auto& r : runner.reports()) {
      if (r.ref.template_kind == manifests::TemplateKind::kTrainJob) continue;  // the runtime's jobs here
      const std::string suffix = "/spec/template";
      ASSERT_TRUE(r.ref.pointer.ends_with(suffix)) << r.ref.pointer;
      const json& job = docs.at(r.document - 1).at(json::json_pointer(r.ref.pointer.substr(0, r.ref.pointer.size() - suffix.size())));
      const std::string step = job["metadata"]["labels"].value(manifests::kTrainerStepLabel, "");
      seen.insert(step);
      if (step == "trainer") {
        EXPECT_TRUE(r.result.mutated()) << file << " " << r.ref.path << ": " << r.result.summary;
      } else {
        EXPECT_EQ(r.result.reason, Reason::kNotTraining) << file << " " << r.ref.path << " (" << step << ")";
      }
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"trainer", "dataset-initializer", "model-initializer"}));
}

TEST(CorpusSuite, APaddleJobIsNotPyTorchAndIsLeftAlone) {
  // The PaddleJob example (which mounts its own /dev/shm too) says nothing of PyTorch: not patched.
  fs::path p = fs::path(SHMGUARD_CORPUS_DIR) / "kubeflow__training-operator/examples__paddlepaddle__simple-gpu.yaml";
  if (!fs::exists(p)) GTEST_SKIP() << "corpus not found";
  std::ostringstream out;
  config::Config cfg;
  manifests::OfflineRunner runner(cfg, manifests::OutputFormat::kYaml, out);
  std::ifstream in(p);
  auto done = runner.process(p.string(), in);
  ASSERT_TRUE(done.ok()) << done.error();
  runner.finish();
  ASSERT_FALSE(runner.reports().empty());
  for (const auto& r : runner.reports()) {
    EXPECT_EQ(r.result.reason, Reason::kNotTraining);
    EXPECT_EQ(r.result.summary, "skipped: not PyTorch (PaddleJob)");
  }
  EXPECT_EQ(out.str(), test::read_file(p));
}

}  // namespace
