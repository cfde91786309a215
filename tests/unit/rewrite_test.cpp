// The in-place rewrite of `mutate -i` (files/rewrite.h): a file kept what it was (mode, links,
// symlinks), every file or none, and what a failed rename leaves. The renames fail on demand:
// this test defines rename() itself, as tests/fault/fail_rename.cpp does for the whole binary.
#include "files/rewrite.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "base/text.h"

namespace {

std::set<int> g_failing;  // the rename() calls that fail with EIO, numbered from the last arm()
int g_renames = 0;

void arm(std::set<int> failing) {
  g_failing = std::move(failing);
  g_renames = 0;
}

}  // namespace

extern "C" int rename(const char* from, const char* to) noexcept {
  using Rename = int (*)(const char*, const char*);
  static const Rename real = reinterpret_cast<Rename>(dlsym(RTLD_NEXT, "rename"));
  if (g_failing.count(++g_renames) != 0) {
    errno = EIO;
    return -1;
  }
  return real(from, to);
}

namespace {

namespace fs = std::filesystem;
using namespace shmguard;
using Changes = std::vector<std::pair<files::RewritePlan, std::string>>;

class Rewrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shmguard-rewrite-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    arm({});
  }
  void TearDown() override {
    arm({});
    fs::remove_all(dir_);
  }

  std::string file(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    FILE* f = std::fopen(p.c_str(), "wb");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return p.string();
  }
  static std::string text(const std::string& path) {
    auto r = read_file(path);
    return r ? *r : "<unreadable>";
  }
  // Three files planned, each to become "new N".
  Changes three() {
    Changes c;
    for (int i = 1; i <= 3; ++i) {
      auto plan = files::plan_rewrite(file("f" + std::to_string(i) + ".yaml", "old " + std::to_string(i)));
      EXPECT_TRUE(plan) << plan.error();
      c.emplace_back(*plan, "new " + std::to_string(i));
    }
    return c;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

TEST_F(Rewrite, EveryFileReplacedAndNothingLeftBeside) {
  auto c = three();
  ::chmod(c[1].first.path.c_str(), 0640);
  struct stat st{};
  ::stat(c[0].first.path.c_str(), &st);
  const ino_t before = st.st_ino;
  ASSERT_TRUE(files::rewrite_all(c));
  EXPECT_EQ(text(c[0].first.path), "new 1");
  EXPECT_EQ(text(c[2].first.path), "new 3");
  ::stat(c[0].first.path.c_str(), &st);
  EXPECT_NE(st.st_ino, before) << "one link: replaced by a rename (a new inode)";
  ::stat(c[1].first.path.c_str(), &st);
  EXPECT_EQ(st.st_mode & 07777, 0640u) << "the mode is kept";
  EXPECT_EQ(names(), (std::vector<std::string>{"f1.yaml", "f2.yaml", "f3.yaml"}));
  EXPECT_EQ(g_renames, 3);
}

TEST_F(Rewrite, AFailedRenamePutsBackWhatWasReplaced) {
  auto c = three();
  arm({3});  // the third file's rename
  std::vector<std::string> kept;
  const Status s = files::rewrite_all(c, &kept);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), c[2].first.path + ": cannot replace: Input/output error; the old content was put back in " +
                           c[0].first.path + " " + c[1].first.path);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(text(c[i].first.path), "old " + std::to_string(i + 1));
  EXPECT_TRUE(kept.empty());
  EXPECT_EQ(names(), (std::vector<std::string>{"f1.yaml", "f2.yaml", "f3.yaml"})) << "no staged file left";
}

TEST_F(Rewrite, TheFirstRenameFailingWritesNothing) {
  auto c = three();
  arm({1});
  const Status s = files::rewrite_all(c);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), c[0].first.path + ": cannot replace: Input/output error; nothing was written");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(text(c[i].first.path), "old " + std::to_string(i + 1));
  EXPECT_EQ(names().size(), 3u);
}

TEST_F(Rewrite, AFileThatCannotBePutBackIsNamedAndKept) {
  auto c = three();
  arm({2, 3});  // the second file's rename, then putting the first back
  std::vector<std::string> kept;
  const Status s = files::rewrite_all(c, &kept);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), c[1].first.path + ": cannot replace: Input/output error; NOT put back: " + c[0].first.path +
                          ": cannot replace: Input/output error");
  EXPECT_EQ(kept, std::vector<std::string>{c[0].first.path});
  EXPECT_EQ(text(c[0].first.path), "new 1");
  EXPECT_EQ(text(c[1].first.path), "old 2");
  EXPECT_EQ(names().size(), 3u);
}

TEST_F(Rewrite, AFileRemovedAfterThePlanStopsTheRunBeforeAnyWrite) {
  auto c = three();
  fs::remove(c[2].first.path);
  const Status s = files::rewrite_all(c);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find(c[2].first.path), std::string::npos) << s.error();
  EXPECT_TRUE(s.error().ends_with("; nothing was written")) << s.error();
  EXPECT_EQ(text(c[0].first.path), "old 1");
  EXPECT_EQ(g_renames, 0) << "the old content is read before any rename";
  EXPECT_EQ(names(), (std::vector<std::string>{"f1.yaml", "f2.yaml"}));
}

TEST_F(Rewrite, AFileChangedAfterThePlanGetsItsChangedContentBack) {
  // The old content is read when the run starts, not when it was planned: a failure puts back
  // what the file held then.
  auto c = three();
  file("f1.yaml", "edited meanwhile");
  arm({2});
  ASSERT_FALSE(files::rewrite_all(c));
  EXPECT_EQ(text(c[0].first.path), "edited meanwhile");
}

TEST_F(Rewrite, ThroughASymlinkTheTargetIsWrittenAndTheLinkStays) {
  const std::string target = file("real.yaml", "old");
  const std::string link = (dir_ / "link.yaml").string();
  ASSERT_EQ(::symlink("real.yaml", link.c_str()), 0);
  auto plan = files::plan_rewrite(link);
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_TRUE(plan->via_link);
  EXPECT_EQ(plan->target, fs::canonical(target).string());
  ASSERT_TRUE(files::rewrite(*plan, "new"));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(text(target), "new");
}

TEST_F(Rewrite, AHardLinkedFileIsWrittenInPlace) {
  const std::string a = file("a.yaml", "old");
  const std::string b = (dir_ / "b.yaml").string();
  ASSERT_EQ(::link(a.c_str(), b.c_str()), 0);
  auto plan = files::plan_rewrite(a);
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_TRUE(plan->in_place);
  arm({1});  // no rename happens: a failing one would not matter
  ASSERT_TRUE(files::rewrite_all({{*plan, "new"}}));
  EXPECT_EQ(g_renames, 0);
  EXPECT_EQ(text(b), "new") << "both names still one file";
}

TEST_F(Rewrite, OnlyARegularFileThatExistsCanBePlanned) {
  EXPECT_EQ(files::plan_rewrite((dir_ / "none.yaml").string()).error(),
            (dir_ / "none.yaml").string() + ": No such file or directory");
  EXPECT_EQ(files::plan_rewrite(dir_.string()).error(), dir_.string() + ": not a regular file");
}

}  // namespace
