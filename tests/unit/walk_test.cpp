// The -f arguments expanded (files/walk.h): directories walked in order, symlinks followed once,
// nothing skipped without saying why.
#include "files/walk.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using shmguard::files::expand_inputs;
using Strings = std::vector<std::string>;

class Walk : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("shmguard-walk-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "b" / "deep");
    for (const char* f : {"z.yaml", "a.yml", "b/c.json", "b/deep/d.yaml", "notes.txt", "b/.hidden.yaml"})
      std::ofstream(root_ / f) << "x: 1\n";
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string at(const std::string& rel) const { return (root_ / rel).string(); }

  fs::path root_;
};

TEST_F(Walk, DirectoriesGiveTheirManifestsSortedAndFilesComeAsGiven) {
  auto r = expand_inputs({"-", at("notes.txt"), root_.string()});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, (Strings{"-", at("notes.txt"), at("a.yml"), at("b/.hidden.yaml"), at("b/c.json"), at("b/deep/d.yaml"),
                         at("z.yaml")}));
}

TEST_F(Walk, ASymlinkBackUpTheTreeIsEnteredOnce) {
  fs::create_directory_symlink(root_, root_ / "b" / "loop");
  auto r = expand_inputs({root_.string()});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->size(), 5u);
}

TEST_F(Walk, ADanglingManifestLinkIsAnErrorAndOtherDanglingLinksAreNot) {
  fs::create_symlink(root_ / "gone.txt", root_ / "readme");
  EXPECT_TRUE(expand_inputs({root_.string()}));
  fs::create_symlink(root_ / "gone.yaml", root_ / "job.yaml");
  auto r = expand_inputs({root_.string()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), at("job.yaml") + ": cannot follow symlink: No such file or directory");
  EXPECT_EQ(expand_inputs({at("missing")}).error(), at("missing") + ": No such file or directory");
}

TEST_F(Walk, SkipIsAskedWithThePathBelowTheDirectoryAndLeftOutDirectoriesAreNotEntered) {
  std::vector<std::pair<std::string, bool>> asked;
  auto r = expand_inputs({root_.string()}, [&](std::string_view, std::string_view relative, bool directory) {
    asked.emplace_back(std::string(relative), directory);
    return relative == "b";
  });
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*r, (Strings{at("a.yml"), at("z.yaml")}));
  for (const auto& [rel, dir] : asked) EXPECT_FALSE(rel.starts_with("b/")) << rel;
  EXPECT_NE(std::find(asked.begin(), asked.end(), std::pair<std::string, bool>{"b", true}), asked.end());
  // A file named by an absolute -f is asked about by its name alone.
  std::string relative;
  (void)expand_inputs({at("z.yaml")}, [&](std::string_view, std::string_view rel, bool) {
    relative = rel;
    return false;
  });
  EXPECT_EQ(relative, "z.yaml");
}

}  // namespace
