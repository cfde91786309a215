// Text helpers (see text.h).
#include "base/text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shmguard {

Result<std::string> read_file(const std::string& path) {
  // POSIX reads: a stream over a directory throws from its buffer (libstdc++), this never does.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Failure{path + ": cannot read: " + std::strerror(errno)};
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int err = n < 0 ? errno : 0;
    ::close(fd);
    if (err) return Failure{path + ": cannot read: " + std::strerror(err)};
    return text;  // an empty file is "", not a failure
  }
}

std::string_view trim_end(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

std::string printable(std::string_view value, std::size_t max) {
  std::string out;
  for (char c : value) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f || u >= 0x80) ? '?' : c;
  }
  return out;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string prometheus_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

bool glob_match(std::string_view p, std::string_view t) {
  std::size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::optional<int> parse_duration_s(std::string_view text) {
  constexpr long kDay = 24 * 3600;
  if (text.empty()) return std::nullopt;
  long total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    long n = 0;
    const std::size_t digits = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      n = n * 10 + (text[i++] - '0');
      if (n > kDay) return std::nullopt;
    }
    if (i == digits) return std::nullopt;
    if (i == text.size()) {  // a bare number is seconds, and only on its own
      if (digits != 0) return std::nullopt;
      total = n;
      break;
    }
    const char unit = text[i++];
    total += n * (unit == 'h' ? 3600 : unit == 'm' ? 60 : unit == 's' ? 1 : -kDay * 4);
    if (total < 0 || total > kDay) return std::nullopt;
  }
  if (total > kDay) return std::nullopt;
  return static_cast<int>(total);
}

}  // namespace shmguard
