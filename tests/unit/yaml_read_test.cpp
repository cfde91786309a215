// yaml_read: documents split with their exact bytes, and the tree libyaml's events build.
#include <gtest/gtest.h>

#include "base/limits.h"
#include "manifests/conflict_marker.h"
#include "manifests/yaml_doc.h"
#include "yaml_test_util.h"

using namespace shmguard::manifests;
using namespace shmguard::manifests::test;
using nlohmann::json;

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

// The reader takes its input in 64 KiB chunks: lines and separators that straddle a chunk's end,
// and a line longer than several chunks, come out whole, with the right line numbers.
TEST(DocumentReader, LinesAcrossChunksComeOutWhole) {
  std::string text;
  std::vector<int> starts;  // the first line of each document
  int line = 1;
  for (int d = 0; d < 40; ++d) {
    starts.push_back(line);
    text += "---\n";
    ++line;
    for (int k = 0; k < 50 + d * 7; ++k, ++line) text += "key" + std::to_string(k) + ": " + std::string(k * 3 + d, 'v') + "\n";
  }
  starts.push_back(line);
  text += "---\nlong: " + std::string(300 * 1024, 'x');  // no final newline
  auto docs = split(text);
  ASSERT_EQ(docs.size(), starts.size());
  std::string joined;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    joined += docs[i].text;
    EXPECT_EQ(docs[i].first_line, starts[i]) << i;
    EXPECT_EQ(docs[i].text.rfind("---\n", 0), 0u) << i;
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(load(docs.back().text)["long"].get<std::string>().size(), 300u * 1024);
}

TEST(ParseDocument, ErrorsCarryTheLine) {
  YamlDocument doc;
  auto bad = parse_document("a: 1\nb: [1,\nc: 3\n", doc);
  EXPECT_FALSE(bad.ok());
  EXPECT_GT(bad.line(), 1);
  EXPECT_EQ(bad.error().rfind("invalid YAML: ", 0), 0u) << bad.error();
  EXPECT_EQ(bad.kind<ParseFailure>(), ParseFailure::kSyntax);
  const auto deep = parse_document(std::string(200, '[') + std::string(200, ']') + "\n", doc);
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.kind<ParseFailure>(), ParseFailure::kBound) << deep.error();
  EXPECT_FALSE(parse_document("a: *nope\n", doc).ok());
  EXPECT_FALSE(parse_document("? [a]\n: b\n", doc).ok());
  EXPECT_TRUE(parse_document("# only a comment\n", doc).ok());
  EXPECT_EQ(doc.root, nullptr);
  EXPECT_TRUE(parse_document("---\n", doc).ok());
  EXPECT_EQ(doc.root, nullptr);
}

// A merge-conflict marker is named at its own line, before libyaml would fail a line later (or,
// inside a quoted string that goes on over lines, read it as text).
TEST(ParseDocument, ConflictMarkersAreNamedAtTheirOwnLine) {
  YamlDocument doc;
  const std::string conflicted = "apiVersion: v1\nkind: Pod\n<<<<<<< HEAD\nmetadata: {name: a}\n=======\n"
                                 "metadata: {name: b}\n>>>>>>> feature/x\n";
  auto bad = parse_document(conflicted, doc);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.line(), 3);
  EXPECT_EQ(bad.kind<ParseFailure>(), ParseFailure::kConflictMarker);
  EXPECT_EQ(bad.error(), "merge-conflict marker \"<<<<<<< HEAD\" (resolve the conflict first)");
  // libyaml alone takes this for text inside the string: the marker is still what is reported.
  auto quoted = parse_document("a: \"one\n=======\ntwo\"\n", doc);
  ASSERT_FALSE(quoted.ok());
  EXPECT_EQ(quoted.line(), 2);
  EXPECT_EQ(quoted.error(), "merge-conflict marker \"=======\" (resolve the conflict first)");
  auto crlf = parse_document("a: 1\r\n>>>>>>> main\r\n", doc);
  EXPECT_EQ(crlf.line(), 2);
  EXPECT_EQ(crlf.error(), "merge-conflict marker \">>>>>>> main\" (resolve the conflict first)");
  // Not markers: indented (a block scalar's content), six or eight signs, a sign run glued to text.
  for (const char* fine : {"a: |\n  <<<<<<< HEAD\n  =======\n", "a: x\n# <<<<<<< HEAD\n", "a: \"b\n<<<<<<\"\n",
                           "a: \"b\n========\"\n", "a: \"b\n>>>>>>>x\"\n"})
    EXPECT_TRUE(parse_document(fine, doc).ok()) << fine;
}

TEST(ConflictMarker, FoundAndRecognisedInAFailure) {
  EXPECT_FALSE(find_conflict_marker("a: 1\n"));
  EXPECT_FALSE(find_conflict_marker(""));
  auto m = find_conflict_marker("a: 1\n\n=======");  // the last line, without a line break
  ASSERT_TRUE(m);
  EXPECT_EQ(m->line, 3);
  EXPECT_EQ(m->text, "=======");
  const std::string message = conflict_marker_message(*m);
  EXPECT_TRUE(is_conflict_marker_error("k8s/job.yaml:3: " + message));
  EXPECT_TRUE(is_conflict_marker_error("dir: x/job.yaml:12: " + message));  // ": " in the file's name
  EXPECT_FALSE(is_conflict_marker_error("job.yaml:3: invalid YAML: " + message));
  EXPECT_FALSE(is_conflict_marker_error(message));
}

TEST(ParseDocument, KeepsStylesSpansAndAnchors) {
  const std::string text = "a: 'q'\nb: |\n  x\nc: &x {k: v}\nd: *x\n";
  YamlDocument doc;
  ASSERT_TRUE(parse_document(text, doc).ok());
  ASSERT_EQ(doc.root->pairs.size(), 4u);
  const YamlNode* a = doc.root->pairs[0].second;
  EXPECT_EQ(a->style, ScalarStyle::kSingle);
  EXPECT_EQ(text.substr(a->start, a->end - a->start), "'q'");
  EXPECT_EQ(doc.root->pairs[1].second->style, ScalarStyle::kLiteral);
  EXPECT_EQ(doc.root->pairs[1].second->line, 2);
  const YamlNode* c = doc.root->pairs[2].second;
  EXPECT_TRUE(c->anchored && c->flow);
  EXPECT_EQ(doc.root->pairs[3].second, c);  // the alias is the anchored node itself
  EXPECT_TRUE(doc.has_aliases);
  ASSERT_TRUE(doc.unshare(100));
  EXPECT_NE(doc.root->pairs[3].second, doc.root->pairs[2].second);  // now a copy
  EXPECT_FALSE(doc.has_aliases);
}

TEST(ParseDocument, NestingIsLimitedWhileParsing) {
  YamlDocument doc;
  std::string deep(200, '[');
  deep += std::string(200, ']');
  auto deep_parsed = parse_document(deep, doc);
  EXPECT_FALSE(deep_parsed.ok());
  EXPECT_EQ(deep_parsed.error().find("invalid YAML"), std::string::npos) << deep_parsed.error();  // a bound, not a syntax error
  EXPECT_FALSE(parse_document("a: &a [*a]\n", doc).ok());  // an alias inside its own node
}

// Heights are the nesting an alias brings with it: the bound counts the expansion.
TEST(ParseDocument, HeightsCountNestedCollections) {
  YamlDocument doc;
  ASSERT_TRUE(parse_document("a: [[1], 2, {}]\nb: x\nc: {d: [[[]]]}\n", doc).ok());
  const YamlNode* root = doc.root;
  EXPECT_EQ(root->pairs[1].second->height, 0);                   // a scalar
  EXPECT_EQ(root->pairs[0].second->items[2]->height, 1);         // an empty mapping
  EXPECT_EQ(root->pairs[0].second->items[0]->height, 1);         // [1]
  EXPECT_EQ(root->pairs[0].second->height, 2);                   // [[1], 2, {}]
  EXPECT_EQ(root->pairs[2].second->height, 4);                   // {d: [[[]]]}
  EXPECT_EQ(root->height, 5);
  // An anchored list 100 deep, aliased 20 and 40 collections down: 20 + 100 fits in 128, 40 + 100
  // does not, though the text itself never nests deeper than 100.
  const std::string anchored = "a: &x " + std::string(100, '[') + std::string(100, ']') + "\n";
  auto aliased_at = [&](int depth) { return anchored + "b: " + std::string(depth, '[') + "*x" + std::string(depth, ']') + "\n"; };
  EXPECT_TRUE(parse_document(aliased_at(20), doc).ok());
  EXPECT_EQ(doc.root->height, 121);  // the root, "b"'s 20 lists and the alias's 100
  auto refused = parse_document(aliased_at(40), doc);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), std::string(shmguard::kNestingError) + " (alias expanded)");
}

TEST(TextIndex, MapsCharactersToBytes) {
  const std::string text = "a: \xC3\xA9t\xC3\xA9\nb: 1\n";  // "été": 2 bytes per é
  TextIndex idx(text);
  EXPECT_EQ(idx.byte(3), 3u);
  EXPECT_EQ(idx.byte(4), 5u);  // after the first é
  EXPECT_EQ(idx.byte(6), 8u);
  TextIndex ascii("a: 1\n");
  EXPECT_EQ(ascii.byte(2), 2u);
}
