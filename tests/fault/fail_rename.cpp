// A fault for tests, loaded with LD_PRELOAD: the rename() call numbered SHMGUARD_FAIL_RENAME
// (1-based, counted in this process) fails with EIO; every other call is the C library's. It lets
// tests/e2e/test_files.py make the third of five `mutate -i` renames fail.
#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>

namespace {
int calls = 0;
}

extern "C" int rename(const char* from, const char* to) {
  using Rename = int (*)(const char*, const char*);
  static Rename real = reinterpret_cast<Rename>(dlsym(RTLD_NEXT, "rename"));
  const char* n = std::getenv("SHMGUARD_FAIL_RENAME");
  if (n && ++calls == std::atoi(n)) {
    errno = EIO;
    return -1;
  }
  return real(from, to);
}
