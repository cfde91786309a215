// base/text.h: the one way a file is read whole, and the text helpers.
#include "base/text.h"

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
