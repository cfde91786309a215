// Surgical edits: new lines follow the document's own layout; unsupported shapes say why.
#include "manifests/surgical.h"

#include <gtest/gtest.h>

using namespace shmguard::manifests;
using nlohmann::json;

namespace {

std::string edit(const std::string& text, const std::string& pointer, const json& ops, std::string* why = nullptr) {
  YamlDocument doc;
  EXPECT_TRUE(parse_document(text, doc).ok());
  auto plan = plan_edits(doc, {{pointer, &ops}});
  if (!plan) {
    if (why) *why = plan.error();
    return "";
  }
  auto r = edit_in_place(text, doc, *plan);
  if (why) *why = r.error();
  return r ? r->text : "";
}

const json kMount = {{"name", "shmguard-dshm"}, {"mountPath", "/dev/shm"}};

}  // namespace

TEST(Surgical, AppendsToIndentlessAndIndentedSequences) {
  json ops = json::array({{{"op", "add"}, {"path", "/spec/containers/0/volumeMounts/-"}, {"value", kMount}}});
  EXPECT_EQ(edit("spec:\n  containers:\n  - name: a\n    volumeMounts:\n    - name: x  # keep\n      mountPath: /x\n", "", ops),
            "spec:\n  containers:\n  - name: a\n    volumeMounts:\n    - name: x  # keep\n      mountPath: /x\n"
            "    - name: shmguard-dshm\n      mountPath: /dev/shm\n");
  EXPECT_EQ(edit("spec:\n    containers:\n        -   name: a\n            volumeMounts:\n                -   name: x\n", "", ops),
            "spec:\n    containers:\n        -   name: a\n            volumeMounts:\n                -   name: x\n"
            "                -   name: shmguard-dshm\n                    mountPath: /dev/shm\n");
}

TEST(Surgical, FlowCollectionsGetFlowItems) {
  json ops = json::array({{{"op", "add"}, {"path", "/spec/volumes/-"},
                           {"value", {{"name", "v"}, {"emptyDir", {{"medium", "Memory"}}}}}}});
  EXPECT_EQ(edit("spec: {volumes: [{name: a}]}\n", "", ops),
            "spec: {volumes: [{name: a}, {name: v, emptyDir: {medium: Memory}}]}\n");
  EXPECT_EQ(edit("spec:\n  volumes: []\n", "", ops), "spec:\n  volumes: [{name: v, emptyDir: {medium: Memory}}]\n");
}

TEST(Surgical, NullValueBecomesABlockBelowItsKey) {
  json ops = json::array({{{"op", "replace"}, {"path", "/spec/volumes"}, {"value", json::array({{{"name", "v"}}})}}});
  EXPECT_EQ(edit("spec:\n  volumes: ~  # none\n  x: 1\n", "", ops), "spec:\n  volumes:  # none\n    - name: v\n  x: 1\n");  // no sequence to copy: step-indented
}

TEST(Surgical, JsonStaysJsonWithItsIndentation) {
  json ops = json::array({{{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{"a", "1"}}}}});
  EXPECT_EQ(edit("{\n    \"metadata\": {\n        \"name\": \"p\"\n    }\n}\n", "", ops),
            "{\n    \"metadata\": {\n        \"name\": \"p\",\n        \"annotations\": {\n            \"a\": \"1\"\n"
            "        }\n    }\n}\n");
}

TEST(Surgical, CrlfDocumentsGetCrlfLines) {
  json ops = json::array({{{"op", "add"}, {"path", "/metadata/annotations/b"}, {"value", "2"}}});
  EXPECT_EQ(edit("metadata:\r\n  annotations:\r\n    a: \"1\"\r\n", "", ops),
            "metadata:\r\n  annotations:\r\n    a: \"1\"\r\n    b: \"2\"\r\n");
}

std::string edit_all(const std::string& text, const std::vector<TemplatePatch>& patches, std::string* why, int* line) {
  YamlDocument doc;
  EXPECT_TRUE(parse_document(text, doc).ok());
  auto plan = plan_edits(doc, patches);
  if (!plan) {
    *why = plan.error();
    *line = plan.line();
    return "";
  }
  auto r = edit_in_place(text, doc, *plan);
  *why = r.error();
  *line = r.line();
  return r ? r->text : "";
}

TEST(Surgical, TemplatesSharingAnAnchorGetTheSameEditOnce) {
  // Two templates reach one anchored node; both ask for the same addition: written once, at the anchor.
  const std::string text = "a: &t\n  metadata:\n    annotations: {a: b}  # keep\nb: *t\n";
  json ops = json::array({{{"op", "add"}, {"path", "/metadata/annotations/c"}, {"value", "2"}}});
  std::string why;
  int line = -1;
  EXPECT_EQ(edit_all(text, {{"/a", &ops}, {"/b", &ops}}, &why, &line),
            "a: &t\n  metadata:\n    annotations: {a: b, c: \"2\"}  # keep\nb: *t\n");
  // Different values under the shared node: refused, naming the anchor's line.
  json other = json::array({{{"op", "add"}, {"path", "/metadata/annotations/c"}, {"value", "3"}}});
  EXPECT_EQ(edit_all(text, {{"/a", &ops}, {"/b", &other}}, &why, &line), "");
  EXPECT_EQ(line, 1);
  EXPECT_NE(why.find("templates sharing the anchor"), std::string::npos) << why;
  // Lists: the same element appended by each alias once; different elements conflict.
  const std::string list = "x: &s\n  volumes:\n  - name: a\ny: *s\n";
  json v1 = json::array({{{"op", "add"}, {"path", "/volumes/-"}, {"value", {{"name", "v"}}}}});
  json v2 = json::array({{{"op", "add"}, {"path", "/volumes/-"}, {"value", {{"name", "w"}}}}});
  EXPECT_EQ(edit_all(list, {{"/x", &v1}, {"/y", &v1}}, &why, &line), "x: &s\n  volumes:\n  - name: a\n  - name: v\ny: *s\n");
  EXPECT_EQ(edit_all(list, {{"/x", &v1}, {"/y", &v2}}, &why, &line), "");
  EXPECT_EQ(line, 1);
  // A layout the editor does not support fails without a line (the caller may re-emit).
  json rep = json::array({{{"op", "replace"}, {"path", "/k"}, {"value", "v"}}});
  EXPECT_EQ(edit_all("k: |\n  block\n", {{"", &rep}}, &why, &line), "");
  EXPECT_EQ(line, 0);
}

TEST(Surgical, ReplacesABlockSequenceItemInItsPlace) {
  // refresh_patch's "replace /spec/volumes/N" when shmguard's volume is not a Memory emptyDir.
  json vol = {{"name", "shmguard-dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "8Gi"}}}};
  json ops = json::array({{{"op", "replace"}, {"path", "/spec/volumes/1"}, {"value", vol}}});
  const std::string text =
      "spec:\n  volumes:\n  - name: data  # keep\n    hostPath: {path: /d}\n  - name: shmguard-dshm\n"
      "    hostPath:\n      path: /dev/shm\n  # after\n  containers: []\n";
  EXPECT_EQ(edit(text, "", ops),
            "spec:\n  volumes:\n  - name: data  # keep\n    hostPath: {path: /d}\n  - name: shmguard-dshm\n"
            "    emptyDir:\n      medium: Memory\n      sizeLimit: 8Gi\n  # after\n  containers: []\n");
  // In a flow list the item is written again in flow style, its neighbours kept.
  EXPECT_EQ(edit("spec:\n  volumes: [{name: data}, {name: shmguard-dshm, hostPath: {path: /x}}]  # v\n", "", ops),
            "spec:\n  volumes: [{name: data}, {name: shmguard-dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}]  # v\n");
  // The last item of a text without a final line break: still none after it.
  EXPECT_EQ(edit("volumes:\n- name: shmguard-dshm\n  hostPath: {path: /x}", "",
                 json::array({{{"op", "replace"}, {"path", "/volumes/0"}, {"value", vol}}})),
            "volumes:\n- name: shmguard-dshm\n  emptyDir:\n    medium: Memory\n    sizeLimit: 8Gi");
}
