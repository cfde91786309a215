// YAML documents: splitting, type-faithful conversion, in-place patching and emitting.
#include "manifests/yaml_doc.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace shmguard::manifests;
using nlohmann::json;

namespace {
std::vector<RawDocument> split(const std::string& text) {
  std::istringstream in(text);
  DocumentReader r(in);
  std::vector<RawDocument> docs;
  RawDocument d;
  while (r.next(d)) docs.push_back(d);
  return docs;
}
json load(const std::string& text) {
  YamlError err;
  YamlDocument doc;
  EXPECT_TRUE(parse_document(text, doc, err)) << err.message;
  auto j = to_json(doc.root, 100000, err);
  EXPECT_TRUE(j) << err.message;
  return *j;
}
std::string emit(const std::string& text) {
  YamlError err;
  YamlDocument doc;
  EXPECT_TRUE(parse_document(text, doc, err)) << err.message;
  auto s = emit_yaml(doc.root, 100000, err);
  EXPECT_TRUE(s) << err.message;
  return *s;
}
}  // namespace

TEST(DocumentReader, SplitsKeepingExactBytes) {
  std::string text = "# head\na: 1\n---\nb: 2\n--- # c\nc: 3\n---\n";
  auto docs = split(text);
  ASSERT_EQ(docs.size(), 4u);
  std::string joined;
  for (auto& d : docs) joined += d.text;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(docs[1].first_line, 3);
  EXPECT_EQ(docs[2].first_line, 5);
}

TEST(DocumentReader, NoFinalNewlineAndCrlf) {
  auto docs = split("a: 1\r\n---\r\nb: 2");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].text + docs[1].text, "a: 1\r\n---\r\nb: 2");
  EXPECT_EQ(load(docs[1].text)["b"], 2);
}

TEST(DocumentReader, SeparatorNeedsColumnZeroAndSpace) {
  auto docs = split("a: |\n  ---\n  x\nb: ----\n");
  EXPECT_EQ(docs.size(), 1u);
}

TEST(ToJson, ResolvesPlainScalarsLikeKubernetes) {
  auto j = load("a: 1\nb: '1'\nc: 1.5\nd: true\ne: on\nf: \"on\"\ng: ~\nh:\ni: 0x1F\nj: 0644\nk: '0644'\nl: 08\nm: 1Gi\nn: !!str 5\n");
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"], "1");
  EXPECT_EQ(j["c"], 1.5);
  EXPECT_EQ(j["d"], true);
  EXPECT_EQ(j["e"], true);
  EXPECT_EQ(j["f"], "on");
  EXPECT_TRUE(j["g"].is_null());
  EXPECT_TRUE(j["h"].is_null());
  EXPECT_EQ(j["i"], 31);
  EXPECT_EQ(j["j"], 420);
  EXPECT_EQ(j["k"], "0644");
  EXPECT_EQ(j["l"], 8.0);
  EXPECT_EQ(j["m"], "1Gi");
  EXPECT_EQ(j["n"], "5");
}

TEST(ToJson, AliasBombFailsWithinBudget) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'k'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n";
    prev = c;
  }
  YamlError err;
  YamlDocument doc;
  ASSERT_TRUE(parse_document(bomb, doc, err)) << err.message;
  EXPECT_FALSE(to_json(doc.root, bomb.size() * 16 + 4096, err));
  EXPECT_NE(err.message.find("too many"), std::string::npos);
}

TEST(ParseDocument, ErrorsCarryTheLine) {
  YamlError err;
  YamlDocument doc;
  EXPECT_FALSE(parse_document("a: 1\nb: [1,\nc: 3\n", doc, err));
  EXPECT_GT(err.line, 1);
  EXPECT_FALSE(parse_document("a: *nope\n", doc, err));
  EXPECT_FALSE(parse_document("? [a]\n: b\n", doc, err));
  EXPECT_TRUE(parse_document("# only a comment\n", doc, err));
  EXPECT_EQ(doc.root, nullptr);
  EXPECT_TRUE(parse_document("---\n", doc, err));
  EXPECT_EQ(doc.root, nullptr);
}

TEST(NeedsQuotes, AmbiguousStrings) {
  for (const char* s : {"", "true", "on", "No", "y", "null", "~", "1", "1.0", "08", "0644", "1e3", ".5", "-1",
                        "- a", "a: b", "a #b", "#x", "*x", "&x", "!x", "{x", "[x", "'x", "\"x", "%x", "@x",
                        "`x", " x", "x ", "x:", "12:30", "2024-01-02", "a\tb", "<<", ".inf", "---"}) {
    EXPECT_TRUE(needs_quotes(s)) << "\"" << s << "\"";
  }
  for (const char* s : {"1Gi", "/dev/shm", "shmguard-dshm", "Memory", "pytorch/pytorch:2.4", "a b", "--epochs=1",
                        "./run.sh", "x.y", "http://a/b", "a:b"}) {
    EXPECT_FALSE(needs_quotes(s)) << "\"" << s << "\"";
  }
}

TEST(EmitYaml, RoundTripsTypesAndOrder) {
  std::string in =
      "z: 1\na: '1.0'\nb: \"on\"\nc: '08'\nd: '0644'\ne: 08\nlist:\n- x\n- k: v\n  k2: [1, 2]\n- []\nempty: {}\n"
      "script: |\n  echo hi\n\n  echo there\nkeep: |+\n  a\n\nstrip: |-\n  a\n  b\nnil: null\n";
  std::string out = emit(in);
  EXPECT_EQ(load(out), load(in)) << out;
  EXPECT_LT(out.find("z:"), out.find("a:"));  // order kept
  EXPECT_NE(out.find("a: '1.0'"), std::string::npos) << out;  // quoting style kept
  EXPECT_NE(out.find("b: \"on\""), std::string::npos) << out;
  EXPECT_NE(out.find("script: |\n  echo hi\n\n  echo there\n"), std::string::npos) << out;
}

TEST(ApplyPatch, AddsAndReplacesInPlace) {
  YamlError err;
  YamlDocument doc;
  ASSERT_TRUE(parse_document("spec:\n  template:\n    metadata:\n      annotations: null\n    spec:\n      containers:\n      - name: a\n", doc, err));
  json patch = json::parse(R"([
    {"op":"replace","path":"/metadata/annotations","value":{"shmguard.io/x":"1Gi"}},
    {"op":"add","path":"/spec/volumes","value":[{"name":"v","emptyDir":{}}]},
    {"op":"add","path":"/spec/containers/0/volumeMounts","value":[{"mountPath":"/dev/shm","name":"v"}]},
    {"op":"add","path":"/metadata/annotations/a~1b~0c","value":"on"}
  ])");
  auto applied = apply_patch(doc, "/spec/template", patch);
  ASSERT_TRUE(applied.ok()) << applied.error();
  auto j = to_json(doc.root, 10000, err);
  EXPECT_EQ((*j)["spec"]["template"]["metadata"]["annotations"]["a/b~c"], "on");
  EXPECT_EQ((*j)["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"], "v");
  auto text = emit_yaml(doc.root, 10000, err);
  EXPECT_NE(text->find("a/b~c: \"on\""), std::string::npos) << *text;
  EXPECT_NE(text->find("- name: v\n"), std::string::npos) << *text;  // name first
  EXPECT_FALSE(apply_patch(doc, "/nope", patch).ok());
}

TEST(EmitJson, KeepsOrderAndTypes) {
  YamlError err;
  YamlDocument doc;
  ASSERT_TRUE(parse_document("b: '1'\na: 2\nc: [true, null]\n", doc, err));
  auto s = emit_json(doc.root, 1000, 0, err);
  ASSERT_TRUE(s);
  EXPECT_EQ(json::parse(*s), json::parse(R"({"b":"1","a":2,"c":[true,null]})"));
  EXPECT_LT(s->find("\"b\""), s->find("\"a\""));
}
