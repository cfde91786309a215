// In-place rewrites (see rewrite.h).
#include "files/rewrite.h"

#include "base/text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace shmguard::files {
namespace {

std::string why() { return std::strerror(errno); }

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
    std::string msg = done.error();
    if (back.empty() && lost.empty()) msg += "; nothing was written";
    if (!back.empty()) {
      msg += "; the old content was put back in";
      for (auto it = back.rbegin(); it != back.rend(); ++it) msg += " " + *it;
    }
    for (const auto& l : lost) msg += "; NOT put back: " + l;
    return Failure{msg};
  }
  return Ok{};
}

}  // namespace shmguard::files
