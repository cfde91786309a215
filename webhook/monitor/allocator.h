// The monitor's hold on memory it freed. Linked with tcmalloc (CMakeLists.txt), each thread keeps
// a cache of the blocks it freed, up to 32 MiB across threads by default: the monitor's 32 summary
// readers (one thread each, started every cycle) each kept the ~128-256 KiB bodies they had read,
// which no other thread could reuse: 13 MiB of its 73 MiB peak over 10,000 pods (docs/performance.md).
#pragma once

#include <cstddef>

namespace shmguard::monitor {

// Caps what tcmalloc's thread caches hold in all at `bytes`; false when the process does not run
// on tcmalloc (the sanitizer builds, a build without it), where nothing changes, or when
// TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES is set (tcmalloc's own setting: that figure stands).
bool cap_thread_caches(std::size_t bytes);

// Hands the free pages the allocator holds back to the OS (after the first list of pods, whose
// pages are freed at once); false without tcmalloc.
bool release_free_memory();

}  // namespace shmguard::monitor
