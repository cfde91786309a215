// Input files of `mutate` and `check` and in-place rewrites: directory walks that never skip a
// path silently, and writes that keep what a file is (its link, owner, group, mode, hard links).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace shmguard::cli {

// Expands -f arguments: "-" (stdin) and files as given; directories recursively, their .yaml,
// .yml and .json files sorted. Symlinks are followed (a directory once: cycles end there). A path
// that does not exist, an unreadable directory or a dangling link is an error naming the path
// and the reason.
Result<std::vector<std::string>> expand_inputs(const std::vector<std::string>& args);

// How an in-place rewrite keeps the file what it was.
struct RewritePlan {
  std::string path;    // as given
  std::string target;  // the regular file behind any symlinks: what is written
  bool via_link = false;  // `path` itself is a symlink
  bool in_place = false;  // hard-linked, or its owner cannot be kept by a rename: write the content in place
};

// Decides, before anything is written, how `path` can be rewritten keeping its owner, group,
// mode and links: a temporary file beside it renamed over it (atomic) when the owner can be kept,
// else the content written in place when the file is writable; otherwise an error.
Result<RewritePlan> plan_rewrite(const std::string& path);

// Writes `text` as the plan says; the error names the file.
Status rewrite(const RewritePlan& plan, const std::string& text);

// Rewrites every file or none (`mutate -i` over many files). Each file's old content is read and
// each new one staged in a temporary file beside it before any file is replaced; then they are
// replaced in order. When one fails, the files already replaced (and a file written in place part
// way) get their old content back, and the error names the file, why, and what was put back.
Status rewrite_all(const std::vector<std::pair<RewritePlan, std::string>>& changes);

}  // namespace shmguard::cli
