// The offline runner: byte-for-byte passthrough, mutation, reports and input errors.
#include "manifests/offline.h"

#include <gtest/gtest.h>

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

Run run(const std::string& text, OutputFormat fmt = OutputFormat::kYaml) {
  std::ostringstream out;
  OfflineRunner r(cfg, fmt, out);
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
  EXPECT_EQ(r.reports[0].path, "spec.pytorchReplicaSpecs.Worker.template");
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
  auto r = run("a: 1\n---\nb: [1,\nc: 2\n");
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
}
