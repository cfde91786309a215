// AdmissionReview handling: versions, uid echo, base64 patch, skips, and bad requests.
#include "admission/review.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../test_util.h"

using namespace shmguard;
using namespace shmguard::admission;
using nlohmann::json;
using shmguard::test::base64_decode;

namespace {
config::Config cfg;

json review(const std::string& api_version, json pod, std::string op = "CREATE") {
  json r = shmguard::test::admission_review(api_version, pod, "705ab4f5-6393-11e8-b7cc-42010a800002");
  r["request"]["namespace"] = "ml";
  r["request"]["operation"] = op;
  r["request"]["dryRun"] = false;
  r["request"]["oldObject"] = nullptr;
  return r;
}

json training_pod() {
  return json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"train-",
    "labels":{"training.kubeflow.org/job-name":"j"}},
    "spec":{"containers":[{"name":"c","image":"pytorch/pytorch:2.4.0"}]}})");
}
}  // namespace

TEST(Review, V1InjectsWithBase64Patch) {
  auto pod = training_pod();
  auto out = handle_review(review("admission.k8s.io/v1", pod).dump(), cfg);
  ASSERT_NE(out.decision, Decision::kRejected);
  auto res = json::parse(out.body);
  EXPECT_EQ(res["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(res["kind"], "AdmissionReview");
  EXPECT_EQ(res["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(res["response"]["allowed"], true);
  EXPECT_EQ(res["response"]["patchType"], "JSONPatch");
  auto patch = json::parse(base64_decode(res["response"]["patch"]));
  auto patched = pod.patch(patch);
  EXPECT_EQ(patched["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "8Gi");
  EXPECT_EQ(out.decision, admission::Decision::kInjected);
  EXPECT_EQ(out.pod, "train-*");
  EXPECT_EQ(out.namespace_name, "ml");
  EXPECT_EQ(out.size, "8Gi");
}

TEST(Review, V1beta1IsEchoed) {
  auto out = handle_review(review("admission.k8s.io/v1beta1", training_pod()).dump(), cfg);
  EXPECT_EQ(json::parse(out.body)["apiVersion"], "admission.k8s.io/v1beta1");
}

TEST(Review, NonCreateAndNonPodAreAllowedWithoutPatch) {
  auto out = handle_review(review("admission.k8s.io/v1", training_pod(), "UPDATE").dump(), cfg);
  auto res = json::parse(out.body)["response"];
  EXPECT_EQ(res["allowed"], true);
  EXPECT_FALSE(res.contains("patch"));
  EXPECT_EQ(out.reason, Reason::kNotCreate);
  auto r = review("admission.k8s.io/v1", training_pod());
  r["request"]["kind"]["kind"] = "Deployment";
  r["request"]["kind"]["group"] = "apps";
  out = handle_review(r.dump(), cfg);
  EXPECT_FALSE(json::parse(out.body)["response"].contains("patch"));
  EXPECT_EQ(out.reason, Reason::kNotAPod);
}

TEST(Review, SkippedPodHasNoPatch) {
  json pod = {{"metadata", {{"name", "web"}}}, {"spec", {{"containers", {{{"name", "c"}, {"image", "nginx"}}}}}}};
  auto out = handle_review(review("admission.k8s.io/v1", pod).dump(), cfg);
  auto res = json::parse(out.body)["response"];
  EXPECT_EQ(res["allowed"], true);
  EXPECT_FALSE(res.contains("patch"));
  EXPECT_FALSE(res.contains("patchType"));
  EXPECT_EQ(out.decision, admission::Decision::kSkipped);
}

TEST(Review, WarningsArePlainText) {
  auto pod = training_pod();
  pod["metadata"]["annotations"] = {{"shmguard.io/batch-size", "1\n2\x07"}};
  auto out = handle_review(review("admission.k8s.io/v1", pod).dump(), cfg);
  auto w = json::parse(out.body)["response"]["warnings"];
  ASSERT_EQ(w.size(), 1u);
  for (char c : w[0].get<std::string>()) EXPECT_GE(static_cast<unsigned char>(c), 0x20);
}

TEST(Review, BadRequestsAre400WithAMessageThatSaysWhat) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "request body is not valid JSON: unexpected end of input at byte 0"},
      {"not json", "request body is not valid JSON: invalid literal at byte 0"},
      {"[]", "request body is not a JSON object"},
      {"{}", "kind must be AdmissionReview"},
      {R"({"kind":"AdmissionReview"})", "apiVersion must be admission.k8s.io/v1 or admission.k8s.io/v1beta1"},
      {R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"})", "AdmissionReview has no request object"},
      {R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v2","request":{"uid":"x"}})",
       "apiVersion must be admission.k8s.io/v1 or admission.k8s.io/v1beta1"},
      {R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":7}})",
       "request.uid must be a non-empty string"},
      {R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":[]})", "AdmissionReview has no request object"},
      {"{\"a\":\"\xff\xfe\"}", "request body is not valid JSON: invalid UTF-8 in a string at byte 6"},
  };
  for (const auto& [body, message] : cases) {
    auto out = handle_review(body, cfg);
    EXPECT_EQ(out.decision, Decision::kRejected) << body;
    EXPECT_EQ(out.error, message) << body;
    EXPECT_EQ(out.body, "") << body;
  }
}

TEST(Review, DeepNestingIsRefusedBeforeParsing) {
  std::string deep(1000000, '[');
  auto out = handle_review(deep, cfg);
  EXPECT_EQ(out.decision, Decision::kRejected);
  EXPECT_NE(out.error.find("nesting deeper than 128"), std::string::npos) << out.error;
}

TEST(Review, WrongTypesInsideTheRequestStillAdmit) {
  auto r = review("admission.k8s.io/v1", json::array({1, 2}));
  auto out = handle_review(r.dump(), cfg);
  EXPECT_NE(out.decision, Decision::kRejected);
  EXPECT_EQ(json::parse(out.body)["response"]["allowed"], true);
  r = review("admission.k8s.io/v1", {{"metadata", "x"}, {"spec", {{"containers", "y"}}}});
  r["request"]["kind"] = "Pod";
  out = handle_review(r.dump(), cfg);
  EXPECT_NE(out.decision, Decision::kRejected);
  EXPECT_EQ(json::parse(out.body)["response"]["allowed"], true);
}

TEST(Base64, StandardWithPadding) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("\xfb\xff"), "+/8=");
}

TEST(Review, AuditModeAnswersWithoutAPatch) {
  config::Config audit;
  audit.mode = config::Mode::kAudit;
  auto out = handle_review(review("admission.k8s.io/v1", training_pod()).dump(), audit);
  ASSERT_NE(out.decision, Decision::kRejected);
  auto res = json::parse(out.body)["response"];
  EXPECT_EQ(res["allowed"], true);
  EXPECT_FALSE(res.contains("patch"));
  EXPECT_FALSE(res.contains("patchType"));
  EXPECT_EQ(res["warnings"], json::array({"shmguard would inject 8Gi at /dev/shm (audit mode)"}));
  EXPECT_EQ(out.decision, Decision::kAudit);
  EXPECT_STREQ(decision_name(out.decision), "audit");
}

TEST(Review, AuditModeFromTheConfigFile) {
  auto r = config::parse_config("mode: audit\n");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r).mode, config::Mode::kAudit);
  auto bad = config::parse_config("mode: loud\n");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("mode: must be enforce or audit"), std::string::npos) << bad.error();
}

TEST(Review, Base64DecodeInvertsEncode) {
  for (std::string s : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                        std::string(1000, '\xff'), std::string("[{\"op\":\"add\"}]\n\x01")}) {
    EXPECT_EQ(admission::base64_decode(base64_encode(s)), s);
    EXPECT_EQ(admission::base64_decode(base64_encode(s) + "\n"), s);
  }
}

// A pod of a JobSet (a TrainJob's) with no shmguard.io/ annotation is sized from its JobSet's,
// which the server's lookup returns; the patch still applies to the pod as received.
namespace {
json jobset_pod(json annotations = nullptr) {
  json pod = json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"bert-node-0-0-",
    "labels":{"jobset.sigs.k8s.io/jobset-name":"bert","trainer.kubeflow.org/trainjob-ancestor-step":"trainer"}},
    "spec":{"containers":[{"name":"node","image":"pytorch/pytorch:2.4.0","command":["torchrun","train.py"]}]}})");
  if (!annotations.is_null()) pod["metadata"]["annotations"] = annotations;
  return pod;
}
const json kHints = {{"shmguard.io/batch-size", "32"}, {"shmguard.io/num-workers", "4"},
                     {"shmguard.io/sample-size", "1Mi"}, {"shmguard.io/procs-per-pod", "2"}};
}  // namespace

TEST(Review, JobSetPodSizedFromItsJobSetsAnnotations) {
  std::vector<std::string> asked;
  OwnerLookup lookup = [&](const std::string& ns, const std::string& js) {
    asked.push_back(ns + "/" + js);
    OwnerAnnotations a;
    a.annotations = kHints;
    a.annotations["team"] = "nlp";  // not shmguard's: never read
    a.from = "JobSet " + ns + "/" + js;
    a.result = "found";
    return a;
  };
  auto pod = jobset_pod();
  auto out = handle_review(review("admission.k8s.io/v1", pod).dump(), cfg, lookup);
  EXPECT_EQ(asked, std::vector<std::string>{"ml/bert"});
  EXPECT_EQ(out.owner_lookup, "found");
  ASSERT_EQ(out.decision, Decision::kInjected);
  // The same as the pod carrying the hints itself.
  auto own = handle_review(review("admission.k8s.io/v1", jobset_pod(kHints)).dump(), cfg);
  EXPECT_EQ(out.size, own.size);
  EXPECT_EQ(out.procs, "2 from shmguard.io/procs-per-pod");
  EXPECT_NE(out.size, "8Gi");
  auto res = json::parse(out.body);
  auto patched = pod.patch(json::parse(base64_decode(res["response"]["patch"])));
  EXPECT_EQ(patched["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], out.size);
  const std::string sizing = patched["metadata"]["annotations"]["shmguard.io/sizing"];
  EXPECT_NE(sizing.find("annotations from JobSet ml/bert"), std::string::npos) << sizing;
  EXPECT_FALSE(patched["metadata"]["annotations"].contains("shmguard.io/batch-size"));  // not copied onto the pod
}

TEST(Review, OwnerLookupOnlyForJobSetPodsWithoutHints) {
  int calls = 0;
  OwnerLookup lookup = [&](const std::string&, const std::string&) {
    ++calls;
    return OwnerAnnotations{};
  };
  handle_review(review("admission.k8s.io/v1", jobset_pod({{"shmguard.io/batch-size", "8"}})).dump(), cfg, lookup);
  handle_review(review("admission.k8s.io/v1", training_pod()).dump(), cfg, lookup);
  auto bad = jobset_pod();
  bad["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "../../secrets/x";
  EXPECT_EQ(jobset_to_ask(bad), "");
  handle_review(review("admission.k8s.io/v1", bad).dump(), cfg, lookup);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(jobset_to_ask(jobset_pod()), "bert");
  EXPECT_EQ(jobset_to_ask(jobset_pod({{"team", "nlp"}})), "bert");  // other annotations do not count
}

TEST(Review, FailedOwnerLookupFallsBackWithAWarning) {
  OwnerLookup lookup = [](const std::string&, const std::string&) {
    OwnerAnnotations a;
    a.result = "error";
    a.warning = "shmguard: could not read JobSet ml/bert (timed out)";
    return a;
  };
  auto out = handle_review(review("admission.k8s.io/v1", jobset_pod()).dump(), cfg, lookup);
  EXPECT_EQ(out.owner_lookup, "error");
  EXPECT_EQ(out.decision, Decision::kInjected);
  EXPECT_EQ(out.size, "8Gi");  // the pod's own facts: no hints, the default
  auto res = json::parse(out.body);
  EXPECT_EQ(res["response"]["warnings"][0], "shmguard: could not read JobSet ml/bert (timed out)");
}

TEST(Review, JobSetOptOutIsHonoured) {
  OwnerLookup lookup = [](const std::string&, const std::string&) {
    OwnerAnnotations a;
    a.annotations = {{"shmguard.io/inject", "false"}};
    a.result = "found";
    return a;
  };
  auto out = handle_review(review("admission.k8s.io/v1", jobset_pod()).dump(), cfg, lookup);
  EXPECT_EQ(out.decision, Decision::kSkipped);
  EXPECT_EQ(out.reason, Reason::kOptedOut);
}

TEST(Review, AnythingThrownAdmitsThePodUnchanged) {
  for (int kind = 0; kind < 2; ++kind) {
    OwnerLookup lookup = [kind](const std::string&, const std::string&) -> OwnerAnnotations {
      if (kind == 0) throw std::runtime_error("lookup broke");
      throw 42;  // not a std::exception
    };
    auto out = handle_review(review("admission.k8s.io/v1", jobset_pod()).dump(), cfg, lookup);
    EXPECT_EQ(out.decision, Decision::kError);
    EXPECT_EQ(out.reason, Reason::kInternalError);
    EXPECT_EQ(out.error, kind == 0 ? "lookup broke" : "an exception that is not a std::exception");
    auto res = json::parse(out.body)["response"];
    EXPECT_EQ(res["allowed"], true);
    EXPECT_FALSE(res.contains("patch"));
    EXPECT_EQ(res["warnings"][0], "shmguard internal error; pod admitted without /dev/shm sizing");
  }
}

// The engine's edge, through handle_review's engine seam: an engine that throws a std::exception
// and one that throws anything else both leave the pod admitted unchanged, with the warning that
// says so in place of the engine's own (a warning made before the throw is not sent).
namespace {
inject::InjectResult throws_std(const json&, const config::Config&, const inject::InjectOptions&) {
  throw std::runtime_error("engine broke");
}
inject::InjectResult throws_int(const json&, const config::Config&, const inject::InjectOptions&) { throw 42; }
}  // namespace

TEST(Review, AnEngineThatThrowsAdmitsThePodWithAWarning) {
  for (Engine engine : {&throws_std, &throws_int}) {
    auto out = handle_review(review("admission.k8s.io/v1", training_pod()).dump(), cfg, {}, engine);
    EXPECT_EQ(out.decision, Decision::kError);
    EXPECT_EQ(out.reason, Reason::kInternalError);
    EXPECT_EQ(out.error, engine == &throws_std ? "engine broke" : "an exception that is not a std::exception");
    auto res = json::parse(out.body);
    EXPECT_EQ(res["apiVersion"], "admission.k8s.io/v1");
    EXPECT_EQ(res["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_EQ(res["response"]["allowed"], true);
    EXPECT_FALSE(res["response"].contains("patch"));
    EXPECT_EQ(res["response"]["warnings"], json::array({"shmguard internal error; pod admitted without /dev/shm sizing"}));
    EXPECT_EQ(out.warnings.size(), 1u);
  }
}

TEST(Review, TheDefaultEngineIsInjectPod) {
  auto out = handle_review(review("admission.k8s.io/v1", training_pod()).dump(), cfg, {}, &inject::inject_pod);
  EXPECT_EQ(out.decision, Decision::kInjected);
  EXPECT_EQ(out.reason, Reason::kInjected);
}

TEST(Review, ABodyThatIsNoReviewIsRefusedWithoutABody) {
  auto out = handle_review("{}", cfg);
  EXPECT_EQ(out.decision, Decision::kRejected);
  EXPECT_EQ(out.reason, Reason::kBadRequest);
  EXPECT_EQ(out.error, "kind must be AdmissionReview");
  EXPECT_TRUE(out.body.empty());
}

// Every reason has its row, in order, and keeps the text the metrics and logs have always had.
TEST(Reason, NamesAndLevelsComeFromOneTable) {
  EXPECT_STREQ(name(Reason::kInjected), "injected");
  EXPECT_STREQ(name(Reason::kAlreadyInjected), "already-injected");
  EXPECT_STREQ(name(Reason::kInternalError), "internal-error");
  EXPECT_STREQ(name(Reason::kContentType), "content-type");
  EXPECT_EQ(log_level(Reason::kInjected), LogLevel::kInfo);
  EXPECT_EQ(log_level(Reason::kNotTraining), LogLevel::kDebug);
  EXPECT_EQ(log_level(Reason::kInternalError), LogLevel::kError);
  EXPECT_EQ(log_level(Reason::kBadRequest), LogLevel::kWarn);
  for (int status : {400, 411, 413, 431, 505})
    EXPECT_EQ(name(http_reason(status)), "http-" + std::to_string(status));
  EXPECT_EQ(http_reason(418), Reason::kHttp400);
}
