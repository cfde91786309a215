// In-place rewrites (`mutate -i`): writes that keep what a file is (its link, owner, group, mode,
// hard links), and a set of files rewritten all or none (staged beside each file, renamed over it,
// the old content put back when a later one fails).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace shmguard::files {

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
// `kept`, when given, gets the paths (as given) that hold their new content after a failure: those
// whose old content could not be put back.
Status rewrite_all(const std::vector<std::pair<RewritePlan, std::string>>& changes,
                   std::vector<std::string>* kept = nullptr);

}  // namespace shmguard::files
