// The offline runner: byte-for-byte passthrough, mutation, reports and input errors.
#include "manifests/offline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "manifests/yaml_doc.h"

using namespace shmguard;
using namespace shmguard::manifests;
using nlohmann::json;

namespace {
config::Config cfg;

struct Run {
  bool ok;
  std::string out, err;
  std::vector<TemplateReport> reports;
};

Run run(const std::string& text, OutputFormat fmt = OutputFormat::kYaml, unsigned threads = 1) {
  std::ostringstream out;
  OfflineRunner r(cfg, fmt, out);
  r.set_threads(threads);
  std::istringstream in(text);
  Run res;
  auto done = r.process("in.yaml", in);
  res.ok = done.ok();
  res.err = done.error();
  r.finish();
  res.out = out.str();
  res.reports = r.reports();
  return res;
}

const char* kJob = R"(# a training job
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: j
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        metadata:
          annotations:
            shmguard.io/batch-size: "32"
            shmguard.io/num-workers: "4"
            shmguard.io/sample-size: 1Mi
            note: 'on'
        spec:
          containers:
          - name: w
            image: example/trainer:1
            args: ["--lr", "0.1", '08']
)";
}  // namespace

TEST(Offline, UnchangedDocumentsAreByteForByte) {
  std::string text = "# comment\napiVersion: v1\nkind: ConfigMap   # trailing comment\nmetadata: {name: x}\n---\n\n---\n# only a comment\n";
  auto r = run(text);
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out, text);
  EXPECT_TRUE(r.reports.empty());
}

TEST(Offline, MutatesKeepingTypesAndLeadingComments) {
  auto r = run(kJob);
  ASSERT_TRUE(r.ok) << r.err;
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_EQ(r.reports[0].summary_done(), "injected 1Gi");
  EXPECT_EQ(r.reports[0].ref.path, "spec.pytorchReplicaSpecs.Worker.template");
  EXPECT_EQ(r.out.rfind("# a training job\n", 0), 0u) << r.out;
  YamlDocument din, dout;
  ASSERT_TRUE(parse_document(kJob, din).ok());
  ASSERT_TRUE(parse_document(r.out, dout).ok());
  auto in = to_json(din.root, 10000);
  auto out = to_json(dout.root, 10000);
  ASSERT_TRUE(out.ok()) << out.error();
  auto& t = (*out)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"];
  EXPECT_EQ(t["metadata"]["annotations"]["note"], "on");
  EXPECT_EQ(t["metadata"]["annotations"]["shmguard.io/batch-size"], "32");
  EXPECT_EQ(t["spec"]["containers"][0]["args"], json::parse(R"(["--lr","0.1","08"])"));
  EXPECT_EQ(t["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "1Gi");
  // Removing our additions gives back the input.
  t["metadata"]["annotations"].erase("shmguard.io/injected-size");
  t["metadata"]["annotations"].erase("shmguard.io/sizing");
  t["spec"].erase("volumes");
  t["spec"]["containers"][0].erase("volumeMounts");
  EXPECT_EQ(*out, *in);
}

TEST(Offline, KeepsSeparatorsAndOtherDocuments) {
  std::string text = std::string("apiVersion: v1\nkind: Service\nmetadata: {name: s}   # keep me\n---\n") + kJob;
  auto r = run(text);
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out.rfind("apiVersion: v1\nkind: Service\nmetadata: {name: s}   # keep me\n---\n# a training job\n", 0), 0u)
      << r.out;
}

TEST(Offline, CrlfInputStaysCrlf) {
  std::string text = kJob;
  std::string crlf;
  for (char c : text) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  auto r = run(crlf);
  ASSERT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.out.find("\n"), r.out.find("\r\n") + 1);
  for (std::size_t i = 0; i < r.out.size(); ++i) {
    if (r.out[i] == '\n') {
      ASSERT_EQ(r.out[i - 1], '\r') << "bare LF at " << i;
    }
  }
}

TEST(Offline, JsonOutputSingleAndList) {
  auto one = run(kJob, OutputFormat::kJson);
  ASSERT_TRUE(one.ok);
  auto j = json::parse(one.out);
  EXPECT_EQ(j["kind"], "PyTorchJob");
  auto two = run(std::string(kJob) + "---\n" + kJob, OutputFormat::kJson);
  auto l = json::parse(two.out);
  EXPECT_EQ(l["kind"], "List");
  EXPECT_EQ(l["items"].size(), 2u);
  EXPECT_EQ(l["items"][1]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"][0]["name"],
            "shmguard-dshm");
}

TEST(Offline, JsonInput) {
  auto r = run(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"shmguard.io/inject":"true"}},
                   "spec":{"containers":[{"name":"c","image":"x"}]}})");
  ASSERT_TRUE(r.ok) << r.err;
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_TRUE(r.reports[0].result.mutated());
}

TEST(Offline, ErrorsNameFileAndLine) {
  auto r = run("kind: ConfigMap\n---\nb: [1,\nc: 2\n");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.err.rfind("in.yaml:", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("invalid YAML"), std::string::npos);
  r = run("- a\n- b\n");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.err.find("expected a Kubernetes object"), std::string::npos) << r.err;
  r = run("just a string\n");
  EXPECT_FALSE(r.ok);
}

TEST(Offline, CheckReportMarksMissing) {
  std::string text = std::string(kJob);
  auto r = run(text, OutputFormat::kNone);
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_EQ(r.reports[0].result.action, shmguard::inject::Action::kInjected);
  EXPECT_EQ(r.reports[0].summary_planned(), "would inject 1Gi");
  EXPECT_TRUE(r.out.empty());
  ASSERT_TRUE(r.reports[0].result.sizing);
  EXPECT_EQ(r.reports[0].result.size(), 1ULL << 30);
}

TEST(Offline, AnchorsAndAliasesAreExpandedInChangedDocuments) {
  const std::string text = R"(apiVersion: batch/v1
kind: Job
metadata: {name: anchored}
spec:
  template:
    metadata:
      labels: &labels
        training.kubeflow.org/job-name: j
    spec:
      containers:
      - &c
        name: a
        image: example/a:1
        env: &env [{name: X, value: "1"}]
      - name: b
        image: example/b:1
        env: *env
      - *c
)";
  auto r = run(text);
  ASSERT_TRUE(r.ok) << r.err;
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_TRUE(r.reports[0].result.mutated());
  YamlDocument din, dout;
  ASSERT_TRUE(parse_document(text, din).ok());
  ASSERT_TRUE(parse_document(r.out, dout).ok()) << "\n" << r.out;
  auto in = *to_json(din.root, 10000);
  auto out = *to_json(dout.root, 10000);
  EXPECT_EQ(out["spec"]["template"]["spec"]["containers"][1]["env"], in["spec"]["template"]["spec"]["containers"][1]["env"]);
  EXPECT_EQ(out["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"], "/dev/shm");
  // The aliased third container is its own copy: exactly one mount each, not two on a shared node.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out["spec"]["template"]["spec"]["containers"][i]["volumeMounts"].size(), 1u) << i;
  // ... written once at the anchor, which the first and third container share (not twice: a key
  // given twice in one mapping).
  std::size_t mounts = 0;
  for (auto at = r.out.find("volumeMounts:"); at != std::string::npos; at = r.out.find("volumeMounts:", at + 1)) ++mounts;
  EXPECT_EQ(mounts, 2u) << r.out;
}

// A key written twice warns on the template whose text holds it, at the repeat's line; with
// aliases, also on a template that reaches the mapping through one.
TEST(Offline, RepeatedKeysWarnOnTheirOwnTemplate) {
  // A List of two Jobs, `a` and `b`, with these container lines.
  auto list = [](const std::string& a, const std::string& b) {
    auto job = [](const char* name, const std::string& container) {
      return std::string("- apiVersion: batch/v1\n  kind: Job\n  metadata: {name: ") + name +
             "}\n  spec:\n    template:\n      spec:\n        containers:\n" + container;
    };
    return "apiVersion: v1\nkind: List\nitems:\n" + job("a", a) + job("b", b);
  };
  const std::string text = list("        - name: c\n          image: x\n          image: y\n", "        - name: c\n          image: z\n");
  auto warnings = [](const TemplateReport& r) {
    std::vector<std::string> w;
    for (const auto& x : r.result.warnings) w.push_back(std::to_string(x.line) + ": " + x.text);
    return w;
  };
  auto r = run(text, OutputFormat::kNone);
  ASSERT_TRUE(r.ok) << r.err;
  ASSERT_EQ(r.reports.size(), 2u);
  EXPECT_EQ(warnings(r.reports[0]), std::vector<std::string>{"13: key \"image\" given twice in one mapping (also at line 12): "
                                                             "kubectl keeps this last value and drops the first"});
  EXPECT_TRUE(warnings(r.reports[1]).empty());
  // The second job's container is the first one's, through an alias: the repeat is its too.
  const std::string aliased = list("        - &c\n          name: c\n          image: x\n          image: y\n", "        - *c\n");
  r = run(aliased, OutputFormat::kNone);
  ASSERT_TRUE(r.ok) << r.err << "\n" << aliased;
  ASSERT_EQ(r.reports.size(), 2u);
  EXPECT_EQ(warnings(r.reports[0]).size(), 1u) << aliased;
  EXPECT_EQ(warnings(r.reports[1]), warnings(r.reports[0])) << aliased;
}

// ---- threads: any number writes what one does ----

namespace {

// What a report says, in the order the reports came.
std::vector<std::string> said(const std::vector<TemplateReport>& reports) {
  std::vector<std::string> lines;
  for (const auto& r : reports)
    lines.push_back(r.file + ":" + std::to_string(r.line) + " #" + std::to_string(r.document) + " " + r.ref.kind + "/" +
                    r.ref.name + " " + r.summary_done());
  return lines;
}

// `count` documents over several batches: training jobs each sized differently (so a report or a
// document out of place shows), other kinds, comment-only documents; the last has no final newline.
std::string stream(int count) {
  std::string s;
  for (int i = 0; i < count; ++i) {
    switch (i % 4) {
      case 0: {
        std::string job = kJob;
        const std::string from = "batch-size: \"32\"";
        job.replace(job.find(from), from.size(), "batch-size: \"" + std::to_string(8 + i) + "\"");
        job.replace(job.find("name: j"), 7, "name: j" + std::to_string(i));
        s += "---\n" + job;
        break;
      }
      case 1: s += "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c" + std::to_string(i) + "}\ndata: {a: '1'}\n"; break;
      case 2: s += "--- # nothing but a comment\n# " + std::to_string(i) + "\n"; break;
      default:
        s += "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web" + std::to_string(i) +
             "\nspec:\n  template:\n    spec:\n      containers:\n      - name: nginx\n        image: nginx\n";
    }
  }
  s += "---\nkind: Pod\nmetadata:\n  name: last\n  labels: {shmguard.io/inject: 'true'}\nspec:\n  containers:\n  - name: t\n    image: t\n    command: [\"x\"]";
  return s;
}

}  // namespace

TEST(OfflineRunnerThreads, AnyNumberOfThreadsWritesAndReportsWhatOneDoes) {
  const std::string text = stream(700);  // three batches of up to 256 documents
  for (auto fmt : {OutputFormat::kYaml, OutputFormat::kJson, OutputFormat::kNone}) {
    const auto one = run(text, fmt, 1);
    ASSERT_TRUE(one.ok) << one.err;
    ASSERT_EQ(one.reports.size(), 351u);  // 175 jobs, 175 deployments, the last pod
    for (unsigned threads : {2u, 3u, 8u}) {
      const auto many = run(text, fmt, threads);
      ASSERT_TRUE(many.ok) << many.err;
      EXPECT_EQ(many.out, one.out) << "threads " << threads;
      EXPECT_EQ(said(many.reports), said(one.reports)) << "threads " << threads;
    }
  }
  // The YAML really changed where it should, in order: job 0 first, the last pod last.
  const auto yaml = run(text, OutputFormat::kYaml, 4);
  EXPECT_LT(yaml.out.find("name: j0\n"), yaml.out.find("name: j4\n"));
  EXPECT_LT(yaml.out.rfind("name: last"), yaml.out.rfind("sizeLimit"));
}

TEST(OfflineRunnerThreads, AnInvalidDocumentStopsTheStreamThereWithAnyNumberOfThreads) {
  std::string text = stream(600);
  // Document 401 (in the second batch) turns invalid; its line in the stream is where it starts.
  std::size_t at = 0;
  for (int i = 0; i < 400; ++i) at = text.find("\n---", at + 1);
  text.insert(at + 1, "---\nkind: [unclosed\n");
  const int line = static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at) + 1, '\n')) + 2;
  const auto one = run(text, OutputFormat::kYaml, 1);
  ASSERT_FALSE(one.ok);
  EXPECT_EQ(one.err.rfind("in.yaml:" + std::to_string(line + 1) + ": invalid YAML", 0), 0u) << one.err;
  for (unsigned threads : {2u, 4u}) {
    const auto many = run(text, OutputFormat::kYaml, threads);
    EXPECT_EQ(many.err, one.err);
    EXPECT_EQ(many.out, one.out);  // the 400 documents before it, none after
    EXPECT_EQ(said(many.reports), said(one.reports));
  }
  EXPECT_EQ(one.reports.size(), 200u);
  EXPECT_EQ(one.out.find("kind: [unclosed"), std::string::npos);
}
