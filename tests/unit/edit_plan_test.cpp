// The edit plan: patches resolved once, applied to the tree, and checked against a read-back.
#include "manifests/edit_plan.h"

#include <gtest/gtest.h>

#include "yaml_test_util.h"

using namespace shmguard::manifests;
using namespace shmguard::manifests::test;
using nlohmann::json;

namespace {

shmguard::Result<EditPlan> plan(const YamlDocument& doc, const std::string& prefix, const json& ops) {
  return plan_edits(doc, {{prefix, &ops}});
}

}  // namespace

TEST(EditPlan, ResolvesEachOperationOnce) {
  YamlDocument doc;
  ASSERT_TRUE(parse_document("metadata:\n  annotations: null\nspec:\n  containers:\n  - name: a\n  volumes:\n  - name: x\n", doc).ok());
  json ops = json::parse(R"([
    {"op":"replace","path":"/metadata/annotations","value":{"a":"1"}},
    {"op":"add","path":"/spec/volumes/-","value":{"name":"v"}},
    {"op":"add","path":"/spec/containers/0/volumeMounts","value":[]},
    {"op":"replace","path":"/spec/volumes/0","value":{"name":"y"}}
  ])");
  auto p = plan(doc, "", ops);
  ASSERT_TRUE(p.ok()) << p.error();
  ASSERT_EQ(p->edits.size(), 4u);
  EXPECT_EQ(p->edits[0].op, EditOp::kReplace);
  EXPECT_EQ(p->edits[0].key, "annotations");
  EXPECT_TRUE(p->edits[0].old->is_null());
  EXPECT_EQ(p->edits[1].op, EditOp::kAppend);
  EXPECT_EQ(p->edits[1].parent, resolve(doc.root, "/spec/volumes"));
  EXPECT_EQ(p->edits[2].op, EditOp::kAppend);
  EXPECT_EQ(p->edits[2].key, "volumeMounts");
  EXPECT_EQ(p->edits[3].op, EditOp::kReplace);
  EXPECT_EQ(p->edits[3].old, resolve(doc.root, "/spec/volumes/0"));
  EXPECT_EQ(p->edits[3].path, "/spec/volumes/0");
}

TEST(EditPlan, RefusesWhatItDoesNotHoldAndSaysWhy) {
  YamlDocument doc;
  ASSERT_TRUE(parse_document("a: [x]\nb: s\n", doc).ok());
  auto why = [&](const char* ops) {
    auto p = plan(doc, "", json::parse(ops));
    EXPECT_EQ(p.kind<EditFailure>(), EditFailure::kUnsupportedLayout);
    return p.ok() ? std::string("planned") : p.error();
  };
  EXPECT_EQ(why(R"([{"op":"add","path":"/a/5","value":1}])"), "unsupported operation add /a/5");
  EXPECT_EQ(why(R"([{"op":"add","path":"/b/c","value":1}])"), "cannot add to a scalar at /b/c");
  EXPECT_EQ(why(R"([{"op":"move","path":"/a","from":"/b"}])"), "unsupported operation move /a");
  EXPECT_EQ(why(R"([{"op":"replace","path":"/c","value":1}])"), "path /c does not resolve");
  EXPECT_EQ(why(R"([{"op":"add","path":"/x/y","value":1}])"), "path /x/y does not resolve");
  EXPECT_NE(why(R"([{"path":"/a"}])").find("op"), std::string::npos);  // no "op": nlohmann's message
}

TEST(EditPlan, AppliedToTheTreeInPlace) {
  YamlDocument doc;
  ASSERT_TRUE(parse_document("spec:\n  template:\n    metadata:\n      annotations: null\n    spec:\n      containers:\n      - name: a\n", doc).ok());
  json ops = json::parse(R"([
    {"op":"replace","path":"/metadata/annotations","value":{"shmguard.io/x":"1Gi"}},
    {"op":"add","path":"/spec/volumes","value":[{"name":"v","emptyDir":{}}]},
    {"op":"add","path":"/spec/containers/0/volumeMounts","value":[{"mountPath":"/dev/shm","name":"v"}]},
    {"op":"add","path":"/metadata/annotations/a~1b~0c","value":"on"}
  ])");
  // The last op reaches into a value the first one writes: the plan resolves against the
  // document as it is, so it is refused (inject_pod never asks for it).
  EXPECT_FALSE(plan(doc, "/spec/template", ops).ok());
  ops.erase(3);
  auto p = plan(doc, "/spec/template", ops);
  ASSERT_TRUE(p.ok()) << p.error();
  apply_plan(doc, *p);
  auto j = to_json(doc.root, 10000);
  EXPECT_EQ((*j)["spec"]["template"]["metadata"]["annotations"]["shmguard.io/x"], "1Gi");
  EXPECT_EQ((*j)["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"], "v");
  auto text = emit_yaml(doc.root, 10000);
  EXPECT_NE(text->find("- name: v\n"), std::string::npos) << *text;  // name first
}

TEST(EditPlan, ReadBackSeesEveryChangeOutsideThePlan) {
  const std::string before_text = "a: &t\n  m: {x: \"1\"}\nb: *t\nc: [1, 2]\n";
  YamlDocument before;
  ASSERT_TRUE(parse_document(before_text, before).ok());
  json add_y = json::parse(R"([{"op":"add","path":"/m/y","value":"2"}])");
  auto p = plan_edits(before, {{"/a", &add_y}, {"/b", &add_y}});
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_FALSE(p->edits[0].shared);
  EXPECT_TRUE(p->edits[1].shared);  // the same edit through the alias: written once
  auto reads = [&](const std::string& after_text) {
    YamlDocument after;
    EXPECT_TRUE(parse_document(after_text, after).ok()) << after_text;
    return matches_plan(before.root, after.root, *p, 10000);
  };
  EXPECT_TRUE(reads("a: &t\n  m: {x: \"1\", y: \"2\"}\nb: *t\nc: [1, 2]\n"));
  EXPECT_FALSE(reads("a: &t\n  m: {x: \"1\", y: 2}\nb: *t\nc: [1, 2]\n"));       // the value's type
  EXPECT_FALSE(reads("a: &t\n  m: {x: 1, y: \"2\"}\nb: *t\nc: [1, 2]\n"));       // an untouched scalar
  EXPECT_FALSE(reads("a: &t\n  m: {x: \"1\", y: \"2\"}\nb: *t\nc: [1]\n"));      // an untouched list
  EXPECT_FALSE(reads("a: &t\n  m: {x: \"1\", y: \"2\"}\nb: {m: {x: \"1\"}}\nc: [1, 2]\n"));  // one path lacks it
  // Only /a asked: the alias at /b would change too, which the plan does not say.
  auto only_a = plan_edits(before, {{"/a", &add_y}});
  ASSERT_TRUE(only_a.ok());
  YamlDocument after;
  ASSERT_TRUE(parse_document("a: &t\n  m: {x: \"1\", y: \"2\"}\nb: *t\nc: [1, 2]\n", after).ok());
  EXPECT_FALSE(matches_plan(before.root, after.root, *only_a, 10000));
  EXPECT_FALSE(matches_plan(before.root, after.root, *p, 2));  // out of budget: no
}
