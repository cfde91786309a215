// A watch stream cut into lines, in whatever chunks it arrives (kube/watch.h).
#include "kube/watch.h"

#include <gtest/gtest.h>

#include <vector>

using shmguard::kube::LineSplitter;

namespace {

std::vector<std::string> feed_all(LineSplitter& s, const std::vector<std::string>& chunks, bool* ok = nullptr) {
  std::vector<std::string> lines;
  bool all = true;
  for (const auto& c : chunks)
    all = s.feed(c, [&](std::string_view l) { return lines.emplace_back(l), true; }) && all;
  if (ok) *ok = all;
  return lines;
}

}  // namespace

TEST(LineSplitter, LinesAcrossChunksAndSeveralInOne) {
  LineSplitter s(1024);
  const auto lines = feed_all(s, {"{\"type\":\"ADD", "ED\"}\n{\"a\":1}\n{\"b\"", ":2}\r\n", "\n", "{\"c\":3}"});
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"type\":\"ADDED\"}", "{\"a\":1}", "{\"b\":2}"}));
  EXPECT_EQ(s.pending(), 7u);  // the last line waits for its '\n'
  EXPECT_EQ(feed_all(s, {"\n"}), (std::vector<std::string>{"{\"c\":3}"}));
  EXPECT_EQ(s.pending(), 0u);
}

TEST(LineSplitter, EveryByteAlone) {
  const std::string text = "{\"x\":1}\n{\"y\":22}\n";
  LineSplitter s(64);
  std::vector<std::string> chunks;
  for (char c : text) chunks.emplace_back(1, c);
  EXPECT_EQ(feed_all(s, chunks), (std::vector<std::string>{"{\"x\":1}", "{\"y\":22}"}));
}

TEST(LineSplitter, ALineOverTheBoundIsAnError) {
  LineSplitter s(8);
  bool ok = true;
  feed_all(s, {"0123", "45678"}, &ok);
  EXPECT_FALSE(ok);
  LineSplitter t(8);
  feed_all(t, {"012345678\n"}, &ok);
  EXPECT_TRUE(ok);  // a whole line in one chunk is handed on without copying; the bound is on what waits
}

TEST(LineSplitter, TheReaderStops) {
  LineSplitter s(64);
  int n = 0;
  EXPECT_FALSE(s.feed("a\nb\nc\n", [&](std::string_view) { return ++n < 2; }));
  EXPECT_EQ(n, 2);
}
