// Input walks and in-place rewrites (see files.h).
#include "cli/files.h"

#include "base/text.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

namespace shmguard::cli {
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

Status write_all(int fd, const std::string& text) {
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Failure{why()};
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return Failure{why()};
  return Ok{};
}

bool in_group(gid_t gid) {
  if (gid == ::getegid()) return true;
  gid_t groups[NGROUPS_MAX];
  const int n = ::getgroups(NGROUPS_MAX, groups);
  return std::find(groups, groups + std::max(n, 0), gid) != groups + std::max(n, 0);
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

Result<RewritePlan> plan_rewrite(const std::string& path) {
  RewritePlan p;
  p.path = path;
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return Failure{path + ": " + why()};
  p.target = real;
  std::free(real);
  struct stat st{};
  p.via_link = ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
  if (::stat(p.target.c_str(), &st) != 0) return Failure{path + ": " + why()};
  if (!S_ISREG(st.st_mode)) return Failure{path + ": not a regular file"};
  const std::string dir = p.target.substr(0, p.target.rfind('/') + 1);
  // A rename gives the file the writer's owner: only when that can be set back to the file's own.
  const bool keeps_owner = ::geteuid() == 0 || (st.st_uid == ::geteuid() && in_group(st.st_gid));
  p.in_place = st.st_nlink > 1 || !keeps_owner || ::access(dir.c_str(), W_OK) != 0;
  if (p.in_place && ::access(p.target.c_str(), W_OK) != 0) {
    return Failure{path + ": cannot rewrite keeping its owner " + std::to_string(st.st_uid) +
                                        ":" + std::to_string(st.st_gid) + " (" + why() + ")"};
  }
  return p;
}

namespace {

// Hard links and owners stay as they are; not atomic, so done only after every check passed.
Status write_in_place(const RewritePlan& p, const std::string& text) {
  int fd = ::open(p.target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return Failure{p.path + ": cannot write: " + why()};
  auto w = write_all(fd, text);
  const bool closed = ::close(fd) == 0;
  if (!w || !closed) return Failure{p.path + ": cannot write: " + (w ? why() : w.error())};
  return Ok{};
}

// `text` in a temporary file beside the plan's target, with its owner and mode: its name.
Result<std::string> stage(const RewritePlan& p, const std::string& text) {
  struct stat st{};
  if (::stat(p.target.c_str(), &st) != 0) return Failure{p.path + ": " + why()};
  std::string tmp = p.target + ".shmguard-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Failure{p.path + ": cannot create a temporary file beside it: " + why()};
  std::string err;
  if (::fchown(fd, st.st_uid, st.st_gid) != 0 || ::fchmod(fd, st.st_mode & 07777) != 0) {
    err = "cannot keep owner and mode: " + why();
  } else if (auto w = write_all(fd, text); !w) {
    err = "cannot write: " + w.error();
  }
  if (::close(fd) != 0 && err.empty()) err = "cannot write: " + why();
  if (!err.empty()) {
    ::unlink(tmp.c_str());
    return Failure{p.path + ": " + err};
  }
  return tmp;
}

Status replace(const RewritePlan& p, const std::string& staged) {
  if (::rename(staged.c_str(), p.target.c_str()) == 0) return Ok{};
  const std::string err = why();
  ::unlink(staged.c_str());
  return Failure{p.path + ": cannot replace: " + err};
}

}  // namespace

Status rewrite(const RewritePlan& p, const std::string& text) {
  if (p.in_place) return write_in_place(p, text);
  auto staged = stage(p, text);
  if (!staged) return staged.failure_part();
  return replace(p, *staged);
}

Status rewrite_all(const std::vector<std::pair<RewritePlan, std::string>>& changes, std::vector<std::string>* kept) {
  std::vector<std::string> old(changes.size()), staged(changes.size());
  auto drop_staged = [&](std::size_t from) {
    for (std::size_t i = from; i < staged.size(); ++i)
      if (!staged[i].empty()) ::unlink(staged[i].c_str());
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const auto& [plan, text] = changes[i];
    auto was = read_file(plan.target);
    auto tmp = was && !plan.in_place ? stage(plan, text) : Result<std::string>(std::string());
    if (!was || !tmp) {
      drop_staged(0);
      return Failure{(was ? tmp.error() : was.error()) + "; nothing was written"};
    }
    old[i] = std::move(*was);
    staged[i] = std::move(*tmp);
  }
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const RewritePlan& plan = changes[i].first;
    auto done = plan.in_place ? write_in_place(plan, changes[i].second) : replace(plan, staged[i]);
    if (done) continue;
    drop_staged(i + 1);
    // Put back what was replaced, newest first; a file written in place part way too.
    std::vector<std::string> back, lost;
    for (std::size_t j = plan.in_place ? i + 1 : i; j-- > 0;) {
      if (auto r = rewrite(changes[j].first, old[j])) {
        back.push_back(changes[j].first.path);
      } else {
        lost.push_back(r.error());
        if (kept) kept->push_back(changes[j].first.path);
      }
    }
    std::string msg = done.error() + "; ";
    if (back.empty() && lost.empty()) msg += "nothing was written";
    if (!back.empty()) {
      msg += "the old content was put back in";
      for (auto it = back.rbegin(); it != back.rend(); ++it) msg += " " + *it;
    }
    for (const auto& l : lost) msg += "; NOT put back: " + l;
    return Failure{msg};
  }
  return Ok{};
}

}  // namespace shmguard::cli
