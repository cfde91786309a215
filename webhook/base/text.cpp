// Text helpers (see text.h).
#include "base/text.h"

namespace shmguard {

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

}  // namespace shmguard
