// yaml_convert: the tree as the Kubernetes API reads it, compared with JSON, built from JSON.
#include <gtest/gtest.h>

#include "manifests/yaml_doc.h"
#include "yaml_test_util.h"

using namespace shmguard::manifests;
using namespace shmguard::manifests::test;
using nlohmann::json;

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
  YamlDocument doc;
  ASSERT_TRUE(parse_document(bomb, doc).ok());
  auto j = to_json(doc.root, bomb.size() * 16 + 4096);
  EXPECT_FALSE(j.ok());
  EXPECT_NE(j.error().find("too many"), std::string::npos);
}

TEST(ToJson, NonScalarKeyIsAnErrorWithItsLine) {
  YamlDocument doc;
  auto parsed = parse_document("a: 1\n? [k]\n: v\n", doc);  // refused while reading
  EXPECT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.line(), 2);
}

TEST(EqualsJson, AgreesWithToJson) {
  YamlDocument doc;
  ASSERT_TRUE(parse_document("a: 1\nb: '1'\nc: [on, ~]\n", doc).ok());
  EXPECT_TRUE(equals_json(doc.root, json::parse(R"({"a":1,"b":"1","c":[true,null]})"), 100));
  EXPECT_FALSE(equals_json(doc.root, json::parse(R"({"a":"1","b":"1","c":[true,null]})"), 100));
  EXPECT_FALSE(equals_json(doc.root, json::parse(R"({"a":1,"b":"1"})"), 100));
  EXPECT_FALSE(equals_json(doc.root, json::parse(R"({"a":1,"b":"1","c":[true,null]})"), 2));  // budget
}
