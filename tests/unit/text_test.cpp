// base/text.h: the one way a file is read whole, and the text helpers.
#include "base/text.h"
#include "base/shm_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

using namespace shmguard;

TEST(ReadFile, TheWholeFileAnEmptyOneAndAMissingOneNamed) {
  char path[] = "/tmp/shmguard-text-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(*read_file(path), "");  // empty is a value, not a failure
  std::ofstream(path, std::ios::binary) << std::string("a\0b\nc", 5);
  EXPECT_EQ(*read_file(path), std::string("a\0b\nc", 5));
  std::remove(path);
  auto gone = read_file(path);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error(), std::string(path) + ": cannot read: No such file or directory");
  auto dir = read_file("/");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error(), "/: cannot read: Is a directory");
}

TEST(Lowercase, AsciiOnlyWhateverTheLocale) {
  EXPECT_EQ(lowercase("Content-Type: Application/JSON"), "content-type: application/json");
  EXPECT_EQ(lowercase("PyTorchJob-Controller_1.x"), "pytorchjob-controller_1.x");
  EXPECT_EQ(lowercase(""), "");
  // Bytes past ASCII (UTF-8 here) are left as they are: "É" stays two bytes, unchanged.
  EXPECT_EQ(lowercase("NVIDIA.COM/GPU \xc3\x89"), "nvidia.com/gpu \xc3\x89");
}

TEST(PrometheusLabel, BackslashQuoteAndLineFeedEscapedNothingElse) {
  EXPECT_EQ(prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(prometheus_label("team-a/bert\tx\r{}=,"), "team-a/bert\tx\r{}=,");  // only the three
  EXPECT_EQ(prometheus_label(""), "");
  EXPECT_EQ(prometheus_label("\\n"), "\\\\n");  // a backslash then n: the backslash escaped, not a line feed
}

// base/shm_path.h: the one rule the engine, the monitor, the offline edits and observe read.
TEST(ShmPath, DevShmWithAtMostOneTrailingSlash) {
  static_assert(is_shm_path("/dev/shm") && is_shm_path("/dev/shm/"));
  EXPECT_FALSE(is_shm_path("/dev/shm//"));
  EXPECT_FALSE(is_shm_path("/dev/shmx"));
  EXPECT_FALSE(is_shm_path("/dev/shm/x"));
  EXPECT_FALSE(is_shm_path("/dev"));
  EXPECT_FALSE(is_shm_path(""));
}
