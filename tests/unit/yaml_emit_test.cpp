// yaml_emit: YAML and JSON written back with every value's type and style.
#include <gtest/gtest.h>

#include "manifests/yaml_doc.h"
#include "yaml_test_util.h"

using namespace shmguard::manifests;
using namespace shmguard::manifests::test;
using nlohmann::json;

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

TEST(EmitJson, KeepsOrderAndTypes) {
  YamlDocument doc;
  ASSERT_TRUE(parse_document("b: '1'\na: 2\nc: [true, null]\n", doc).ok());
  auto s = emit_json(doc.root, 1000);
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(json::parse(*s), json::parse(R"({"b":"1","a":2,"c":[true,null]})"));
  EXPECT_LT(s->find("\"b\""), s->find("\"a\""));
}

TEST(YamlString, QuotesOnlyWhatWouldReadAsSomethingElse) {
  EXPECT_EQ(yaml_string("1Gi", false), "1Gi");
  EXPECT_EQ(yaml_string("true", false), "\"true\"");
  EXPECT_EQ(yaml_string("a,b", false), "a,b");
  EXPECT_EQ(yaml_string("a,b", true), "\"a,b\"");
  EXPECT_EQ(yaml_string("two\nlines", false), "\"two\\nlines\"");
}

// render(): the one writer of new content, in each form the splicer, fn and observe ask for.
TEST(Render, EachFormWritesTheSameValue) {
  using Form = RenderStyle::Form;
  const json v = json::parse(R"({"emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}, "name": "shmguard-dshm",
                                 "l": [1, true, null, "on", "a,b"]})");
  EXPECT_EQ(*render(v, {}),
            "name: shmguard-dshm\nemptyDir:\n  medium: Memory\n  sizeLimit: 1Gi\nl:\n- 1\n- true\n- null\n- \"on\"\n- a,b\n");
  EXPECT_EQ(*render(v, {.form = Form::kBlock, .layout = {.step = 4, .seq_indent = 2, .item_indent = 2}, .indent = 2,
                        .inline_first = true, .name_first = false, .eol = "\r\n"}),
            "emptyDir:\r\n      medium: Memory\r\n      sizeLimit: 1Gi\r\n  l:\r\n    - 1\r\n"
            "    - true\r\n    - null\r\n    - \"on\"\r\n    - a,b\r\n  name: shmguard-dshm\r\n");
  EXPECT_EQ(*render(v, {.form = Form::kFlow}),
            "{name: shmguard-dshm, emptyDir: {medium: Memory, sizeLimit: 1Gi}, l: [1, true, null, \"on\", \"a,b\"]}");
  EXPECT_EQ(*render(v, {.form = Form::kJson}),
            R"({"name": "shmguard-dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}, "l": [1, true, null, "on", "a,b"]})");
  EXPECT_EQ(*render(json::parse(R"({"name": "x", "e": {}, "l": [2]})"),
                    {.form = Form::kJsonPretty, .layout = {.step = 3}, .indent = 4, .eol = "\r\n"}),
            "{\r\n       \"name\": \"x\",\r\n       \"e\": {},\r\n       \"l\": [\r\n          2\r\n       ]\r\n    }");
  // A key that YAML 1.1 reads as a bool is quoted in both YAML forms.
  EXPECT_EQ(*render(json::parse(R"({"n": 1})"), {}), "\"n\": 1\n");
  EXPECT_EQ(*render(json::parse(R"({"n": 1})"), {.form = Form::kFlow}), "{\"n\": 1}");
  // Scalars: block and flow quote what would read as another type; flow also ",[]{}".
  EXPECT_EQ(*render(json("a,b"), {}), "a,b");
  EXPECT_EQ(*render(json("a,b"), {.form = Form::kFlow}), "\"a,b\"");
  EXPECT_EQ(*render(json("8"), {}), "\"8\"");
  EXPECT_EQ(*render(json(8), {.form = Form::kJson}), "8");
  EXPECT_FALSE(render(json::object(), {}).ok());
  EXPECT_EQ(*render(json::object(), {.form = Form::kFlow}), "{}");
}
