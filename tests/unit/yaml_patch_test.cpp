// yaml_patch: JSON pointers into the tree.
#include <gtest/gtest.h>

#include "manifests/yaml_doc.h"
#include "yaml_test_util.h"

using namespace shmguard::manifests;
using namespace shmguard::manifests::test;
using nlohmann::json;

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
