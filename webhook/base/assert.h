// Invariants the code relies on, stated in code (the Envoy ASSERT idea): checked in debug and
// sanitizer builds, where a broken one aborts with its place; compiled out of release builds.
#pragma once

#include <cstdio>
#include <cstdlib>

#if !defined(NDEBUG) || defined(SHMGUARD_ASSERTIONS)
#define SHMGUARD_ASSERT(cond)                                                                 \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);        \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
#else
#define SHMGUARD_ASSERT(cond) \
  do {                        \
  } while (0 && (cond))
#endif
