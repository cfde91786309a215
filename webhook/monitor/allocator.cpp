// The allocator's caches (see allocator.h).
#include "monitor/allocator.h"

#include <cstdlib>

// gperftools' C interface (malloc_extension_c.h, whose header Debian ships only in the -dev
// package): declared weak, so that a binary without tcmalloc links and finds them null.
extern "C" {
int MallocExtension_SetNumericProperty(const char* property, std::size_t value) __attribute__((weak));
void MallocExtension_ReleaseFreeMemory() __attribute__((weak));
}

namespace shmguard::monitor {

bool cap_thread_caches(std::size_t bytes) {
  if (MallocExtension_SetNumericProperty == nullptr) return false;
  if (std::getenv("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES")) return false;  // the operator's own figure stands
  return MallocExtension_SetNumericProperty("tcmalloc.max_total_thread_cache_bytes", bytes) != 0;
}

bool release_free_memory() {
  if (MallocExtension_ReleaseFreeMemory == nullptr) return false;
  MallocExtension_ReleaseFreeMemory();
  return true;
}

}  // namespace shmguard::monitor
