// Input walks (see walk.h).
#include "files/walk.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

namespace shmguard::files {
namespace {

using Strings = std::vector<std::string>;

std::string why() { return std::strerror(errno); }

bool manifest_name(const std::string& name) {
  for (const char* ext : {".yaml", ".yml", ".json"}) {
    const std::size_t n = std::strlen(ext);
    if (name.size() > n && name.compare(name.size() - n, n, ext) == 0) return true;
  }
  return false;
}

using Seen = std::set<std::pair<dev_t, ino_t>>;

// Walks `dir` (already stat'ed as `st`; `rel` its path below the -f directory), adding manifest
// files to `out`. `seen` holds the directories entered (device, inode), so a symlink back up the
// tree ends the walk there.
Status walk(const std::string& dir, const std::string& rel, const struct stat& st, Seen& seen, const SkipPath& skip,
            Strings& out) {
  if (!seen.insert({st.st_dev, st.st_ino}).second) return Ok{};
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Failure{dir + ": cannot read directory: " + why()};
  Strings names;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  const int read_errno = errno;
  ::closedir(d);
  if (read_errno != 0) return Failure{dir + ": cannot read directory: " + std::strerror(read_errno)};
  for (const auto& name : names) {
    const std::string path = (dir.ends_with('/') ? dir : dir + "/") + name;
    const std::string below = rel.empty() ? name : rel + "/" + name;
    struct stat est{};
    if (::stat(path.c_str(), &est) != 0) {
      struct stat lst{};
      const bool link = ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
      // A dangling link that does not look like a manifest, or one excluded, is none of our business.
      if (link && errno == ENOENT && (!manifest_name(name) || (skip && skip(path, below, false)))) continue;
      return Failure{path + (link ? ": cannot follow symlink: " : ": ") + why()};
    }
    const bool is_dir = S_ISDIR(est.st_mode);
    if (!is_dir && !(S_ISREG(est.st_mode) && manifest_name(name))) continue;
    if (skip && skip(path, below, is_dir)) continue;
    if (!is_dir) {
      out.push_back(path);
    } else if (auto r = walk(path, below, est, seen, skip, out); !r) {
      return r;
    }
  }
  return Ok{};
}

}  // namespace

Result<std::vector<std::string>> expand_inputs(const std::vector<std::string>& args, const SkipPath& skip) {
  Strings files;
  Seen seen;
  for (const auto& a : args) {
    if (a == "-") {
      files.push_back(a);
      continue;
    }
    struct stat st{};
    if (::stat(a.c_str(), &st) != 0) return Failure{a + ": " + why()};
    if (!S_ISDIR(st.st_mode)) {
      const std::string_view relative = a.starts_with('/') ? std::string_view(a).substr(a.rfind('/') + 1) : a;
      if (!skip || !skip(a, relative, false)) files.push_back(a);
      continue;
    }
    Strings found;
    auto r = walk(a, "", st, seen, skip, found);
    if (!r) return Failure{r.error()};
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

}  // namespace shmguard::files
