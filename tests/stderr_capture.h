// What a piece of code writes on stderr, for the tests of the code that logs (the logger writes to
// file descriptor 2 itself, so the capture swaps that descriptor, not std::cerr).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace shmguard::test {

template <typename Fn>
std::string stderr_of(Fn fn) {
  std::FILE* tmp = std::tmpfile();
  const int saved = ::dup(2);
  ::dup2(::fileno(tmp), 2);
  fn();
  ::dup2(saved, 2);
  ::close(saved);
  std::string out;
  std::rewind(tmp);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, tmp)) > 0;) out.append(buf, n);
  std::fclose(tmp);
  return out;
}

}  // namespace shmguard::test
