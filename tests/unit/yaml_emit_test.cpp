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
  auto s = emit_json(doc.root, 1000, 0);
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
