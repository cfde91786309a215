// yaml_patch: JSON pointers into the tree and RFC 6902 patches applied in place.
#include <gtest/gtest.h>

#include "manifests/yaml_doc.h"
#include "yaml_test_util.h"

using namespace shmguard::manifests;
using namespace shmguard::manifests::test;
using nlohmann::json;

TEST(ApplyPatch, AddsAndReplacesInPlace) {
  YamlDocument doc;
  ASSERT_TRUE(parse_document("spec:\n  template:\n    metadata:\n      annotations: null\n    spec:\n      containers:\n      - name: a\n", doc).ok());
  json patch = json::parse(R"([
    {"op":"replace","path":"/metadata/annotations","value":{"shmguard.io/x":"1Gi"}},
    {"op":"add","path":"/spec/volumes","value":[{"name":"v","emptyDir":{}}]},
    {"op":"add","path":"/spec/containers/0/volumeMounts","value":[{"mountPath":"/dev/shm","name":"v"}]},
    {"op":"add","path":"/metadata/annotations/a~1b~0c","value":"on"}
  ])");
  auto applied = apply_patch(doc, "/spec/template", patch);
  ASSERT_TRUE(applied.ok()) << applied.error();
  auto j = to_json(doc.root, 10000);
  EXPECT_EQ((*j)["spec"]["template"]["metadata"]["annotations"]["a/b~c"], "on");
  EXPECT_EQ((*j)["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"], "v");
  auto text = emit_yaml(doc.root, 10000);
  EXPECT_NE(text->find("a/b~c: \"on\""), std::string::npos) << *text;
  EXPECT_NE(text->find("- name: v\n"), std::string::npos) << *text;  // name first
  EXPECT_FALSE(apply_patch(doc, "/nope", patch).ok());
}

TEST(ApplyPatch, FailuresSayWhy) {
  YamlDocument doc;
  ASSERT_TRUE(parse_document("a: [x]\nb: s\n", doc).ok());
  auto r = apply_patch(doc, "", json::parse(R"([{"op":"add","path":"/a/5","value":1}])"));
  EXPECT_NE(r.error().find("out of range"), std::string::npos) << r.error();
  r = apply_patch(doc, "", json::parse(R"([{"op":"add","path":"/b/c","value":1}])"));
  EXPECT_NE(r.error().find("scalar"), std::string::npos) << r.error();
  r = apply_patch(doc, "", json::parse(R"([{"op":"move","path":"/a","from":"/b"}])"));
  EXPECT_NE(r.error().find("unsupported"), std::string::npos) << r.error();
  r = apply_patch(doc, "", json::parse(R"([{"path":"/a"}])"));  // no "op"
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(load("a: [x]\nb: s\n"), *to_json(doc.root, 100));  // nothing changed
}

TEST(Pointer, TokensAndResolve) {
  EXPECT_EQ(pointer_tokens("/a~1b/~0c/0"), (std::vector<std::string>{"a/b", "~c", "0"}));
  EXPECT_TRUE(pointer_tokens("").empty());
  YamlDocument doc;
  ASSERT_TRUE(parse_document("x: &t\n  y: [1, 2]\n", doc).ok());
  const YamlNode* anchor = nullptr;
  const YamlNode* n = resolve(doc.root, "/x/y/1", &anchor);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->value, "2");
  EXPECT_EQ(anchor, resolve(doc.root, "/x"));  // the walk passed through &t
  EXPECT_EQ(resolve(doc.root, "/x/y/2"), nullptr);
  EXPECT_EQ(resolve(doc.root, "/x/z"), nullptr);
}
